module {
  func.func @main(%arg0: !torch.vtensor<[3],si64>, %arg1: !torch.vtensor<[3,1,1],f32>) -> !torch.vtensor<[3,1,1],f32> {
    %0 = torch.prim.ListConstruct %arg0 : (!torch.vtensor<[3],si64>) -> !torch.list<optional<vtensor>>
    %false = torch.constant.bool false
    %1 = torch.aten.index_put %arg1, %0, %arg1, %false : !torch.vtensor<[3,1,1],f32>, !torch.list<optional<vtensor>>, !torch.vtensor<[3,1,1],f32>, !torch.bool -> !torch.vtensor<[3,1,1],f32>
    return %1 : !torch.vtensor<[3,1,1],f32>
  }
}

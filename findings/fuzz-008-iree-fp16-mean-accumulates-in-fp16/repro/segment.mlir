module {
  func.func @main(%arg0: !torch.vtensor<[5,1,1,3],f16>) -> !torch.vtensor<[5,1,1,1],f16> {
    %int3 = torch.constant.int 3
    %0 = torch.prim.ListConstruct %int3 : (!torch.int) -> !torch.list<int>
    %true = torch.constant.bool true
    %none = torch.constant.none
    %1 = torch.aten.mean.dim %arg0, %0, %true, %none : !torch.vtensor<[5,1,1,3],f16>, !torch.list<int>, !torch.bool, !torch.none -> !torch.vtensor<[5,1,1,1],f16>
    return %1 : !torch.vtensor<[5,1,1,1],f16>
  }
}

module {
  func.func @main(%arg0: !torch.vtensor<[5,5,5],f32>) -> (!torch.vtensor<[5,5],f32>, !torch.vtensor<[5,5],si64>) {
    %int2 = torch.constant.int 2
    %int-1 = torch.constant.int -1
    %false = torch.constant.bool false
    %values, %indices = torch.aten.kthvalue %arg0, %int2, %int-1, %false : !torch.vtensor<[5,5,5],f32>, !torch.int, !torch.int, !torch.bool -> !torch.vtensor<[5,5],f32>, !torch.vtensor<[5,5],si64>
    return %values, %indices : !torch.vtensor<[5,5],f32>, !torch.vtensor<[5,5],si64>
  }
}

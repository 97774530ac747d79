module {
  func.func @main(%arg0: !torch.vtensor<[1,1,1],f32>) -> !torch.vtensor<[1,1,1],f32> {
    %0 = torch.aten.sin %arg0 : !torch.vtensor<[1,1,1],f32> -> !torch.vtensor<[1,1,1],f32>
    return %0 : !torch.vtensor<[1,1,1],f32>
  }
}

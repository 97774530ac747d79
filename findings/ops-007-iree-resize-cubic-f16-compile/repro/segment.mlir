module {
  func.func @test_resize_downsample_scales_cubic(%arg0: !torch.vtensor<[1,1,4,4],f16>, %arg1: !torch.vtensor<[4],f16>) -> !torch.vtensor<[1,1,3,3],f16> attributes {torch.onnx_meta.ir_version = 9 : si64, torch.onnx_meta.opset_version = 19 : si64, torch.onnx_meta.producer_name = "backend-test", torch.onnx_meta.producer_version = ""} {
    %none = torch.constant.none
    %0 = torch.operator "onnx.Cast"(%arg1) {torch.onnx.to = 1 : si64} : (!torch.vtensor<[4],f16>) -> !torch.vtensor<[4],f32> 
    %1 = torch.operator "onnx.Resize"(%arg0, %none, %0) {torch.onnx.mode = "cubic"} : (!torch.vtensor<[1,1,4,4],f16>, !torch.none, !torch.vtensor<[4],f32>) -> !torch.vtensor<[1,1,3,3],f16> 
    return %1 : !torch.vtensor<[1,1,3,3],f16>
  }
}


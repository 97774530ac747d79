module {
  func.func @fuzz_g5d261d4ef7e0(%arg0: !torch.vtensor<[1,1],f32>) -> !torch.vtensor<[1,1],f32> attributes {torch.onnx_meta.ir_version = 10 : si64, torch.onnx_meta.opset_version = 21 : si64, torch.onnx_meta.producer_name = "fpdiff fuzz", torch.onnx_meta.producer_version = ""} {
    %none = torch.constant.none
    %0 = torch.operator "onnx.Gelu"(%arg0) {torch.onnx.approximate = "tanh"} : (!torch.vtensor<[1,1],f32>) -> !torch.vtensor<[1,1],f32> 
    return %0 : !torch.vtensor<[1,1],f32>
  }
}


module {
  func.func @fuzz_g27f7498b5429(%arg0: !torch.vtensor<[?,2],f32>, %arg1: !torch.vtensor<[?,2],si64>, %arg2: !torch.vtensor<[?,2],f32>) -> !torch.vtensor<[?,2],f32> attributes {torch.onnx_meta.ir_version = 10 : si64, torch.onnx_meta.opset_version = 21 : si64, torch.onnx_meta.producer_name = "fpdiff fuzz", torch.onnx_meta.producer_version = ""} {
    %0 = torch.operator "onnx.Constant"() {torch.onnx.value = dense_resource<const_1> : tensor<1xsi64>} : () -> !torch.vtensor<[1],si64> 
    %none = torch.constant.none
    %1:2 = torch.operator "onnx.TopK"(%arg0, %0) {torch.onnx.axis = 1 : si64, torch.onnx.largest = 0 : si64, torch.onnx.sorted = 1 : si64} : (!torch.vtensor<[?,2],f32>, !torch.vtensor<[1],si64>) -> (!torch.vtensor<[?,2],f32>, !torch.vtensor<[?,2],si64>) 
    %2 = torch.operator "onnx.ScatterElements"(%1#0, %arg1, %arg2) {torch.onnx.axis = 0 : si64, torch.onnx.reduction = "add"} : (!torch.vtensor<[?,2],f32>, !torch.vtensor<[?,2],si64>, !torch.vtensor<[?,2],f32>) -> !torch.vtensor<[?,2],f32> 
    return %2 : !torch.vtensor<[?,2],f32>
  }
}

{-#
  dialect_resources: {
    builtin: {
      const_1: "0x080000000200000000000000"
    }
  }
#-}


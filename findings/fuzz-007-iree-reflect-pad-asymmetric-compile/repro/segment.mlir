module {
  func.func @fuzz_g222339ea2273(%arg0: !torch.vtensor<[5,3],f32>) -> !torch.vtensor<[5,6],f32> attributes {torch.onnx_meta.ir_version = 10 : si64, torch.onnx_meta.opset_version = 21 : si64, torch.onnx_meta.producer_name = "fpdiff fuzz", torch.onnx_meta.producer_version = ""} {
    %0 = torch.operator "onnx.Constant"() {torch.onnx.value = dense_resource<const_1> : tensor<4xsi64>} : () -> !torch.vtensor<[4],si64> 
    %none = torch.constant.none
    %1 = torch.operator "onnx.Pad"(%arg0, %0) {torch.onnx.mode = "reflect"} : (!torch.vtensor<[5,3],f32>, !torch.vtensor<[4],si64>) -> !torch.vtensor<[5,6],f32> 
    return %1 : !torch.vtensor<[5,6],f32>
  }
}

{-#
  dialect_resources: {
    builtin: {
      const_1: "0x080000000000000000000000010000000000000000000000000000000200000000000000"
    }
  }
#-}


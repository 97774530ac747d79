module {
  func.func @fuzz_g566e7ada02a9(%arg0: !torch.vtensor<[2,1,1],si64>, %arg1: !torch.vtensor<[2,1,45],f32>) -> !torch.vtensor<[2,1,1],f32> attributes {torch.onnx_meta.ir_version = 10 : si64, torch.onnx_meta.opset_version = 21 : si64, torch.onnx_meta.producer_name = "fpdiff fuzz", torch.onnx_meta.producer_version = ""} {
    %0 = torch.operator "onnx.Constant"() {torch.onnx.value = dense_resource<const_1> : tensor<1xsi64>} : () -> !torch.vtensor<[1],si64> 
    %1 = torch.operator "onnx.Constant"() {torch.onnx.value = dense_resource<const_2> : tensor<1xsi64>} : () -> !torch.vtensor<[1],si64> 
    %2 = torch.operator "onnx.Constant"() {torch.onnx.value = dense_resource<const_3> : tensor<1xsi64>} : () -> !torch.vtensor<[1],si64> 
    %3 = torch.operator "onnx.Constant"() {torch.onnx.value = dense_resource<const_4> : tensor<1xsi64>} : () -> !torch.vtensor<[1],si64> 
    %none = torch.constant.none
    %4 = torch.operator "onnx.Slice"(%arg1, %0, %1, %2, %3) : (!torch.vtensor<[2,1,45],f32>, !torch.vtensor<[1],si64>, !torch.vtensor<[1],si64>, !torch.vtensor<[1],si64>, !torch.vtensor<[1],si64>) -> !torch.vtensor<[2,1,7],f32> 
    %5 = torch.operator "onnx.GatherElements"(%4, %arg0) {torch.onnx.axis = 2 : si64} : (!torch.vtensor<[2,1,7],f32>, !torch.vtensor<[2,1,1],si64>) -> !torch.vtensor<[2,1,1],f32> 
    return %5 : !torch.vtensor<[2,1,1],f32>
  }
}

{-#
  dialect_resources: {
    builtin: {
      const_1: "0x080000001A00000000000000",
      const_2: "0x080000002D00000000000000",
      const_3: "0x080000000200000000000000",
      const_4: "0x080000000300000000000000"
    }
  }
#-}


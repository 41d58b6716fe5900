"""Developer tools: bench, demo, compare (layer by layer against TensorFlow Lite Micro; compare_onnx:
against onnxruntime)."""

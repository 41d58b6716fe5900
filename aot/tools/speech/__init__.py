"""The speech pipeline demo (`aot demo --speech`): TFLM's micro_speech audio preprocessor and keyword
model, bundled in models/, run back to back in one firmware (firmware.py) on a generated clip
(clip.py), checked against TensorFlow Lite Micro (demo.py)."""

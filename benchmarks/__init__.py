"""Side-by-side benchmarks of dlpackarray against numpy, torch, pydlpack, tvm-ffi, pyarrow."""

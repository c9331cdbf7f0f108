# Running code and observing it: device choice, profiler runs, timing, traces as plain data.
# Import the submodules directly; this package re-exports nothing so that the torch-free
# records (DeviceInfo, Timing, Trace) can be read without importing torch.

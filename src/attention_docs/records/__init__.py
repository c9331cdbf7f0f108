# Plain records, the lowest layer: what a measurement holds (timings with their rounds, the
# shape, the device and its data sheet, the machine's load, the profiled trace). No torch and
# nothing else of this package: every other layer reads them.

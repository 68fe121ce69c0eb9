"""The probes' maps as user space fills and reads them: the op tables (library calls,
io_uring and AIO requests), the filters, the config, rings and counters, and the program
arrays of the tail calls."""

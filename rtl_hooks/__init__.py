"""rtl_hooks: cocotb probes, Verilator runner, pyverilog inspection."""

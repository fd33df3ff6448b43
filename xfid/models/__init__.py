"""Built-in roofline/limiter model: workload -> op decomposition, GEMM and RTL-block bounds."""

"""HTTP routes, one module per API area; handlers translate between HTTP and the model."""

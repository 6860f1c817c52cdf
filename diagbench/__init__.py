"""diagbench: find which factor breaks an inference server's launch."""

__version__ = "0.1.0"

"""diagbench: find which factor breaks an inference server's launch."""

__all__ = ["__version__"]

__version__ = "0.1.0"

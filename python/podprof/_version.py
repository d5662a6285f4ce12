"""The package's version: podprof's own (CMakeLists.txt's project VERSION; a test holds them equal)."""
__version__ = "0.1.0"

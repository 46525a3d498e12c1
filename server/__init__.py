"""The bigworld HTTP server: FastAPI routes over the world store (design §6).

Importing this package loads neither ``agents`` nor torch: the server starts fast on any CPU.
"""

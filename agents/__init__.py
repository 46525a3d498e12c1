"""Agents that live outside the server: the HTTP client, the Gymnasium adapter and the command line.

Everything here talks to a bigworld server over HTTP only (design §2): it never imports the
server, the forge or the world's store.
"""

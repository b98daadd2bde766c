"""Networking: the gevent socket server clients and brokers talk to, and the client the controller and replica fetchers use."""

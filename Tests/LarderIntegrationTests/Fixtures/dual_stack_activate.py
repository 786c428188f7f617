#!/usr/bin/env python3
"""A launcher for Larder (Support/Larder's `launcher`): passes it two listening sockets as
systemd socket activation does (LISTEN_FDS, sd_listen_fds(3)), then execs it in this process.

  dual_stack_activate.py LARDER ARGUMENTS...

fd 3, "proxy": [::]:0 with IPV6_V6ONLY off, as a `ListenStream=PORT` socket is by default
(systemd.socket(5) BindIPv6Only=default, with net.ipv6.bindv6only 0): IPv4 clients arrive on it
as IPv4-mapped IPv6 addresses (::ffff:a.b.c.d, RFC 4291 §2.5.5.2). fd 4, "admin": 127.0.0.1:0.
"""
import os
import socket
import sys

proxy = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
proxy.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
proxy.bind(("::", 0))
proxy.listen(128)
admin = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
admin.bind(("127.0.0.1", 0))
admin.listen(128)
for wanted, sock in ((3, proxy), (4, admin)):
    os.dup2(sock.fileno(), wanted)
    os.set_inheritable(wanted, True)
os.environ.update({"LISTEN_FDS": "2", "LISTEN_FDNAMES": "proxy:admin", "LISTEN_PID": str(os.getpid())})
os.execv(sys.argv[1], sys.argv[1:])

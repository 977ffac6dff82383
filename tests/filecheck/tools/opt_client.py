"""`irfuse-opt` and `filecheck` for the FileCheck suite's RUN lines (`opt_client.py TOOL ARGS`):
runs in the warm server `lit.cfg` started (`opt_server.py`, whose socket `IRFUSE_OPT_SERVER`
names), or as the installed command where there is none. Standard library only (run with
`python -S`: no site packages to import)."""

import array
import json
import os
import socket
import struct
import sys


def main() -> None:
    tool, argv = sys.argv[1], sys.argv[2:]
    path = os.environ.get("IRFUSE_OPT_SERVER")
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(path or "")
    except OSError:
        os.execvp(tool, [tool, *argv])
    body = json.dumps({"tool": tool, "argv": argv, "cwd": os.getcwd(), "env": dict(os.environ)}).encode()
    conn.sendmsg([struct.pack("!I", len(body))], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [0, 1, 2]))])
    conn.sendall(body)
    status = b""
    while len(status) < 4:
        chunk = conn.recv(4 - len(status))
        if not chunk:
            sys.stderr.write(f"{tool} (FileCheck suite server): the run ended without an exit status\n")
            sys.exit(1)
        status += chunk
    sys.exit(struct.unpack("!i", status)[0])


if __name__ == "__main__":
    main()

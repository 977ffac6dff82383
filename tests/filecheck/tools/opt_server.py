"""Warm tools for the FileCheck suite: importing xDSL, NumPy and irfuse takes about 0.7 s of
the 1 s an `irfuse-opt` run in the suite costs, and starting `filecheck` about 0.2 s, some
190 runs of each in all. `lit.cfg` starts this server once; `opt_client.py` (what the suite's
RUN lines call `irfuse-opt` and `filecheck`) sends it the tool's name, its arguments, working
directory, environment and its standard input, output and error; the server forks a child,
already imported, that runs the tool's `main` on them exactly as the command would, and the
client exits with the child's status. Each run is a fresh fork of the same imported state, so
no run sees another's. The server stops when lit does.

    python opt_server.py SOCKET
"""

import array
import json
import os
import socket
import struct
import sys
import traceback

import filecheck.main
import irfuse.tools.opt as opt


def _filecheck(argv: list[str]) -> int:
    return filecheck.main.main(["filecheck", *argv]) or 0


TOOLS = {"irfuse-opt": opt.main, "filecheck": _filecheck}


def _run(conn: socket.socket) -> None:
    """In the forked child: the request, then its tool on it; the exit status back."""
    head, fds, _, _ = conn.recvmsg(4, socket.CMSG_SPACE(3 * array.array("i").itemsize))
    received = array.array("i")
    for level, kind, data in fds:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            received.frombytes(data[: len(data) - len(data) % received.itemsize])
    (size,) = struct.unpack("!I", head)
    body = b""
    while len(body) < size:
        chunk = conn.recv(size - len(body))
        if not chunk:
            os._exit(1)
        body += chunk
    request = json.loads(body)
    for target, fd in enumerate(received[:3]):
        os.dup2(fd, target)
        os.close(fd)
    # Streams of the client's descriptors: the server's own were made for /dev/null, which can
    # seek, and a pipe cannot (filecheck reconfigures its output streams, which seeks).
    sys.stdin = open(0, encoding="utf-8", closefd=False)
    sys.stdout = open(1, "w", encoding="utf-8", closefd=False)
    sys.stderr = open(2, "w", encoding="utf-8", closefd=False)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.argv = [request["tool"], *request["argv"]]
    try:
        code = TOOLS[request["tool"]](request["argv"])
    except SystemExit as e:
        if e.code is None or isinstance(e.code, int):
            code = e.code or 0
        else:
            print(e.code, file=sys.stderr)
            code = 1
    except BaseException:  # noqa: BLE001 -- reported as the command itself would report it
        traceback.print_exc()
        code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (BrokenPipeError, OSError):
            pass
    conn.sendall(struct.pack("!i", int(code or 0)))
    os._exit(0)


def serve(path: str) -> None:
    parent = os.getppid()
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(64)
    server.settimeout(1.0)
    while os.getppid() == parent:  # (lit gone: stop)
        try:
            conn, _ = server.accept()
        except socket.timeout:
            continue
        finally:
            try:
                while os.waitpid(-1, os.WNOHANG)[0]:
                    pass
            except ChildProcessError:
                pass
        if os.fork() == 0:
            server.close()
            conn.settimeout(None)
            try:
                _run(conn)
            finally:
                os._exit(1)
        conn.close()


if __name__ == "__main__":
    serve(sys.argv[1])

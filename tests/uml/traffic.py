#!/usr/bin/python3
# Traffic between two UML kernels' mlx5e netdevs (tests/uml/mlx5e_test.sh), run inside
# the guests with the host's python3:
#
#   traffic.py receive ADDR   TCP on port 5001 (one connection, to its end), then UDP on
#                             port 5002 (the datagrams of one message); prints what came
#   traffic.py send ADDR      the other side: 2 MiB over TCP (the stack hands the device
#                             TSO messages: LSO WQEs), then one 4,000-byte UDP message
#                             cut into 1,000-byte datagrams by the device (UDP_SEGMENT:
#                             an LSO WQE of UDP)
#   traffic.py send ADDR datagrams
#                             the same, the UDP message sent as its 4 datagrams: for a
#                             netdev without checksum offload (IPoIB's here), on which
#                             Linux refuses UDP_SEGMENT (EIO)
#
# Each side prints one line the test compares: the bytes and their SHA-256.
import hashlib
import socket
import sys
import time

TCP_BYTES = 2 << 20
UDP_MESSAGE, UDP_SEGMENT = 4000, 1000
SOL_UDP, UDP_SEGMENT_OPT = 17, 103  # linux/udp.h


def pattern(n, k):
    return bytes((i * k + 3) & 0xFF for i in range(n))


def receive(addr):
    tcp = socket.socket()
    tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    tcp.bind((addr, 5001))
    tcp.listen(1)
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind((addr, 5002))
    tcp.settimeout(60)
    conn, _ = tcp.accept()
    conn.settimeout(60)
    h, n = hashlib.sha256(), 0
    while True:
        b = conn.recv(65536)
        if not b:
            break
        h.update(b)
        n += len(b)
    conn.close()  # the sender waits for this: everything arrived
    print(f"tcp received {n} bytes sha256 {h.hexdigest()}", flush=True)
    udp.settimeout(20)
    sizes, data = [], b""
    while len(data) < UDP_MESSAGE:
        b = udp.recv(65536)
        sizes.append(len(b))
        data += b
    print(f"udp received {len(sizes)} datagrams of {'/'.join(map(str, sizes))} bytes sha256 "
          f"{hashlib.sha256(data).hexdigest()}", flush=True)


def send(addr, udp_mode="segment"):
    data = pattern(1 << 16, 7) * (TCP_BYTES >> 16)
    deadline = time.monotonic() + 30
    while True:
        try:
            conn = socket.create_connection((addr, 5001), timeout=5)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    # create_connection's 5 s would bound the whole sendall (Python's socket timeout is the
    # total for sendall): 2 MiB took 5 to 6 s on a slower machine (2026-11-30) and stopped
    # half-way with TimeoutError. The receiver's 60 s, as for its reads.
    conn.settimeout(60)
    conn.sendall(data)
    # sendall returns once the bytes are queued, not delivered: the sender's kernel takes
    # its netdev down right after this program, which would cut off the rest (seen over
    # IPoIB, which has no TSO). The receiver closes once it has read everything.
    conn.shutdown(socket.SHUT_WR)
    while conn.recv(4096):
        pass
    conn.close()
    print(f"tcp sent {len(data)} bytes sha256 {hashlib.sha256(data).hexdigest()}", flush=True)
    msg = pattern(UDP_MESSAGE, 5)
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    time.sleep(1)  # the receiver has read its TCP to the end and waits on UDP
    if udp_mode == "datagrams":
        for i in range(0, UDP_MESSAGE, UDP_SEGMENT):
            udp.sendto(msg[i:i + UDP_SEGMENT], (addr, 5002))
    else:
        udp.setsockopt(SOL_UDP, UDP_SEGMENT_OPT, UDP_SEGMENT)
        udp.sendto(msg, (addr, 5002))
    print(f"udp sent 1 message of {len(msg)} bytes sha256 {hashlib.sha256(msg).hexdigest()}", flush=True)
    time.sleep(2)  # the datagrams on their way before the netdev goes down


if __name__ == "__main__":
    {"receive": receive, "send": send}[sys.argv[1]](*sys.argv[2:])

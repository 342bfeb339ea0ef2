#!/usr/bin/env python3
"""Cut RPC-over-RDMA messages out of a packet capture of iWARP traffic.

Input: a pcap (Ethernet or Linux cooked link type) of TCP connections carrying MPA/DDP/RDMAP,
such as tcpdump of the C siw under an NFS/RDMA mount. Each connection's two byte streams are
reassembled; the MPA request/reply frames are skipped (their private data — the RPC-over-RDMA
CM private data of RFC 8797 after the RFC 6581 IRD/ORD word — is written out too); then every
FPDU is walked (ULPDU length, DDP/RDMAP header, pad, CRC), and untagged Send messages on DDP
queue 0 are reassembled from their segments. Each Send payload — one RPC-over-RDMA message —
is written as OUT/NNN-call.bin (client to server) or OUT/NNN-reply.bin.

This is a test-data tool: it trusts the capture (it is our own VM's traffic) and stops at the
first thing it does not understand.
"""
import os
import struct
import sys

MPA_REQ = b"MPA ID Req Frame"
MPA_REP = b"MPA ID Rep Frame"
SEND_OPCODES = {3, 4, 5, 6}  # Send, Send w/ Invalidate, Send w/ SE, Send w/ SE and Invalidate


def packets(path):
    data = open(path, "rb").read()
    magic = data[:4]
    endian = "<" if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
    linktype = struct.unpack(endian + "I", data[20:24])[0]
    off = 24
    while off + 16 <= len(data):
        _, _, incl, _ = struct.unpack(endian + "IIII", data[off:off + 16])
        frame = data[off + 16:off + 16 + incl]
        off += 16 + incl
        if linktype == 1:      # Ethernet
            if frame[12:14] != b"\x08\x00":
                continue
            ip = frame[14:]
        elif linktype == 113:  # Linux cooked
            if frame[14:16] != b"\x08\x00":
                continue
            ip = frame[16:]
        else:
            raise SystemExit(f"link type {linktype} not handled")
        if ip[0] >> 4 != 4 or ip[9] != 6:
            continue
        ihl = (ip[0] & 15) * 4
        total = struct.unpack(">H", ip[2:4])[0]
        src, dst = ip[12:16], ip[16:20]
        tcp = ip[ihl:total]
        sport, dport, seq = struct.unpack(">HHI", tcp[:8])
        flags = tcp[13]
        doff = (tcp[12] >> 4) * 4
        yield (src, sport, dst, dport), seq, flags, tcp[doff:]


def streams(path):
    """{(src, sport, dst, dport): bytes} with each direction's payload in sequence order."""
    isn, segs = {}, {}
    for key, seq, flags, payload in packets(path):
        if flags & 0x02:  # SYN
            isn[key] = seq + 1
        if payload:
            segs.setdefault(key, {})[seq] = payload
    out = {}
    for key, parts in segs.items():
        start = isn.get(key, min(parts))
        buf = bytearray()
        for seq in sorted(parts, key=lambda s: (s - start) & 0xFFFFFFFF):
            rel = (seq - start) & 0xFFFFFFFF
            p = parts[seq]
            if rel > len(buf):
                raise SystemExit(f"gap in stream {key}: capture lost data")
            buf += p[len(buf) - rel:]
        out[key] = bytes(buf)
    return out


def mpa_frame(stream, key):
    """(private data, offset past the MPA request/reply frame)."""
    if stream[:16] not in (MPA_REQ, MPA_REP):
        raise SystemExit("stream does not start with an MPA frame")
    pd_len = struct.unpack(">H", stream[18:20])[0]
    return stream[20:20 + pd_len], 20 + pd_len


def sends(stream, off):
    """Yield the payload of each untagged Send message on queue 0, reassembled."""
    partial = {}
    while off + 2 <= len(stream):
        ulpdu_len = struct.unpack(">H", stream[off:off + 2])[0]
        ulpdu = stream[off + 2:off + 2 + ulpdu_len]
        if len(ulpdu) < ulpdu_len:
            break  # capture ended mid-FPDU
        off += 2 + ulpdu_len
        off += (-(2 + ulpdu_len)) % 4 + 4  # pad to 4, then the CRC word
        ddp, rdmap = ulpdu[0], ulpdu[1]
        tagged, last = bool(ddp & 0x80), bool(ddp & 0x40)
        opcode = rdmap & 0x0F
        if tagged or opcode not in SEND_OPCODES:
            continue
        qn, msn, mo = struct.unpack(">III", ulpdu[6:18])
        if qn != 0:
            continue
        buf = partial.setdefault(msn, bytearray())
        if mo != len(buf):
            raise SystemExit(f"Send MSN {msn}: segment at MO {mo}, expected {len(buf)}")
        buf += ulpdu[18:]
        if last:
            yield bytes(partial.pop(msn))


def main():
    if len(sys.argv) != 4:
        raise SystemExit("usage: extract-rpcrdma-fixtures.py CAPTURE.pcap SERVER_PORT OUTDIR")
    path, server_port, outdir = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    os.makedirs(outdir, exist_ok=True)
    n = 0
    for key, stream in sorted(streams(path).items(), key=lambda kv: kv[0][1]):
        direction = "call" if key[3] == server_port else "reply"
        pd, off = mpa_frame(stream, key)
        open(os.path.join(outdir, f"{n:03d}-mpa-{direction}-private-data.bin"), "wb").write(pd)
        n += 1
        for msg in sends(stream, off):
            open(os.path.join(outdir, f"{n:03d}-{direction}.bin"), "wb").write(msg)
            n += 1
    print(f"{n} fixtures written to {outdir}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""The differential check of cxv's driver against Linux's (docs/linux-oracle.md).

Reads two command logs the model wrote (CXV_SIM_COMMAND_LOG, cxv-sim-uml --command-log):
one of Linux's mlx5_core/mlx5_ib driving it (in UML), one of cxv's driver (under
cxv-sim run). For each kind of object both drivers made -- an EQ, a CQ, an RC QP and a UD
QP with each transition, a memory key -- it takes one of each side's and compares the
command inputs field by field, by the PRM's names (hw/cmd_layouts.h prints them), and
compares the order of each QP's commands.

Every field is one of (the table, EXPECTED below, says which, and why):
  request    follows what the program asked for (sizes, PSNs, timeouts): not compared;
  allocated  a number, an address or an offset the driver or firmware allocated:
             not compared (an array of them, such as a buffer's pages: given by both);
  peer       the peer's own address (its MAC): each run's own, but given (not 0) by
             both or by neither;
  differs    the two drivers choose differently, and the reason is written down;
  (any other field) must be equal.
It fails on a field that differs and the table does not name, on a `differs` entry that
no longer differs (the table would lie), and on a kind of object missing from a log.

  differential.py [--link eth|ib] LINUX_LOG [LINUX_LOG...] --cxv CXV_LOG [--report FILE]

--link says what both runs' ports were (eth: RoCE, the default; ib: InfiniBand): a
`differs` entry of the other link layer's paths need not differ.
"""
import argparse
import re
import sys

# --- Reading a log -------------------------------------------------------------------

FIELD = re.compile(r"(@0x[0-9a-f]+|[A-Za-z_][A-Za-z0-9_]*(?:\[\d+\])?)=")
NUMBER = re.compile(r"(0x[0-9a-f]+|\d+)")
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def parse_layout(s, i):
    """Parses 'name{f=v g=layout{...} ...}' from s[i:] (after the name): returns the
    fields as a flat dict of dotted names, and the index after the closing brace."""
    assert s[i] == "{", s[i:i + 40]
    i += 1
    fields = {}
    while True:
        while i < len(s) and s[i] == " ":
            i += 1
        if s[i] == "}":
            return fields, i + 1
        m = FIELD.match(s, i)
        if not m:
            raise ValueError("cannot read field at: " + s[i:i + 60])
        name = m.group(1)
        i = m.end()
        v = NUMBER.match(s, i)
        if v:
            fields[name] = int(v.group(1), 0)
            i = v.end()
            continue
        n = NAME.match(s, i)
        if not n or s[n.end()] != "{":
            raise ValueError("cannot read value at: " + s[i:i + 60])
        sub, i = parse_layout(s, n.end())
        for k, val in sub.items():
            fields[name + "." + k] = val


def parse_line(line):
    """One logged command: (layout name of its input, input fields, unnamed bits, output
    fields), or None for a line that is not a command."""
    at = line.find(": in=")
    if at < 0:
        return None
    s = line[at + 5:].rstrip("\n")
    n = NAME.match(s)
    if not n or s[n.end()] != "{":
        return None  # an opcode hw/ has no layout for
    name = n.group(0)
    fin, i = parse_layout(s, n.end())
    if not s.startswith(" unnamed=", i):
        return None
    unnamed, i = parse_layout(s, i + len(" unnamed="))
    if not s.startswith(" out=", i):
        return None
    o = NAME.match(s, i + 5)
    fout, _ = parse_layout(s, o.end())
    return name, fin, unnamed, fout


class log:
    """A driver's objects, from its command log: EQs, CQs, QPs (with their commands in
    order) and memory keys, each with the inputs that made and changed it."""

    def __init__(self, paths):
        self.eqs, self.cqs, self.mkeys, self.srqs = [], [], [], []
        self.qps = {}  # (source, qpn) -> {"st": st, "commands": [(layout, fields, unnamed)]}
        self.order = []  # QPs in creation order
        for src, path in enumerate(paths):
            with open(path, errors="replace") as f:
                for line in f:
                    p = parse_line(line)
                    if p is None:
                        continue
                    name, fin, unnamed, fout = p
                    if fout.get("status", 0) != 0:
                        continue  # refused: made nothing
                    self.add(src, name, fin, unnamed, fout)

    def add(self, src, name, fin, unnamed, fout):
        if name == "create_eq_in":
            self.eqs.append((name, fin, unnamed))
        elif name == "create_cq_in":
            self.cqs.append((name, fin, unnamed))
        elif name == "create_mkey_in":
            self.mkeys.append((name, fin, unnamed))
        elif name in ("create_srq_in", "create_rmp_in"):
            self.srqs.append((name, fin, unnamed))
        elif name == "create_qp_in":
            key = (src, fout.get("qpn", 0))
            self.qps[key] = {"st": fin.get("qpc.st", 0), "commands": [(name, fin, unnamed)]}
            self.order.append(key)
        elif name.endswith("_qp_in") and "qpn" in fin:
            qp = self.qps.get((src, fin["qpn"]))
            if qp is not None:
                qp["commands"].append((name, fin, unnamed))

    def qps_of(self, st):
        return [self.qps[k] for k in self.order if self.qps[k]["st"] == st]


# --- What each field is ------------------------------------------------------------

# (command input layout, field, class, reason). A field named here is not compared as
# "must be equal". `differs` entries must differ in the run (else the table is stale).
REQUEST, ALLOCATED, DIFFERS, PEER = "request", "allocated", "differs", "peer"
EXPECTED = []
ROCE_ONLY = set()  # (layout, field) of `differs` entries that only RoCE paths show


def expect(layout, field, cls, why, roce_only=False):
    EXPECTED.append((layout, field, cls, why))
    if roce_only:
        ROCE_ONLY.add((layout, field))


def classify(layout, field):
    """The class EXPECTED gives a field (an array's element by its array), or None."""
    base = re.sub(r"\[\d+\]", "[]", field)
    for lay, f, cls, _ in EXPECTED:
        if lay == layout and (f == base or (f.endswith(".*") and base.startswith(f[:-1]))):
            return cls, f
    return None, None


CARRIED = "carried"  # a field Linux writes into a transition that does not take it: not compared
TRANSITIONS = ("rst2init_qp_in", "init2rtr_qp_in", "rtr2rts_qp_in")
QP_COMMANDS = ("create_qp_in",) + TRANSITIONS + ("destroy_qp_in",)

# Numbers, addresses and offsets: each driver's own.
for lay in ("create_eq_in", "create_cq_in", "create_mkey_in") + QP_COMMANDS:
    expect(lay, "uid", ALLOCATED, "a DevX user's id (0: the kernel's own objects)")
for lay in QP_COMMANDS + ("init2init_qp_in", "rts2rts_qp_in", "query_qp_in"):
    expect(lay, "qpn", ALLOCATED, "the QP's number")
for f in ("pas[]", "qpc.pd", "qpc.cqn_snd", "qpc.cqn_rcv", "qpc.uar_page", "qpc.dbr_addr", "qpc.page_offset",
          "qpc.log_page_size"):
    expect("create_qp_in", f, ALLOCATED, "the QP's buffer, doorbell record, UAR page, PD and CQs")
expect("rst2init_qp_in", "qpc.counter_set_id", ALLOCATED, "the Q counter set each driver allocated")
expect("init2rtr_qp_in", "qpc.remote_qpn", ALLOCATED, "the peer's QP number")
expect("init2rtr_qp_in", "qpc.primary_address_path.rgid_rip[]", ALLOCATED, "the peer's GID")
for f in ("pas[]", "cq_context.c_eqn_or_apu_element", "cq_context.dbr_addr", "cq_context.uar_page",
          "cq_context.log_page_size", "cq_context.page_offset"):
    expect("create_cq_in", f, ALLOCATED, "the CQ's buffer, doorbell record, UAR page and EQ")
for f in ("pas[]", "eq_context_entry.intr", "eq_context_entry.uar_page", "eq_context_entry.log_page_size",
          "eq_context_entry.page_offset"):
    expect("create_eq_in", f, ALLOCATED, "the EQ's buffer, UAR page and MSI-X vector")
for f in ("memory_key_mkey_entry.mkey_7_0", "memory_key_mkey_entry.pd"):
    expect("create_mkey_in", f, ALLOCATED, "the key's variant byte and PD")

# What the program asked for: sizes, PSNs, timeouts, access, addresses.
for f in ("qpc.log_sq_size", "qpc.log_rq_size", "qpc.log_rq_stride", "qpc.rq_type", "qpc.no_sq", "qpc.cs_req",
          "qpc.cs_res"):
    expect("create_qp_in", f, REQUEST, "the queues' sizes (nvme-rdma's and mlx5_ib's test QP's against the "
           "pingpongs'; mlx5_ib's UD QP has no receive queue, rq_type 3)")
expect("create_cq_in", "cq_context.log_cq_size", REQUEST, "the CQ's size")
expect("create_eq_in", "eq_context_entry.log_eq_size", REQUEST, "the EQ's size")
for f in ("opt_param_mask", "qpc.next_rcv_psn", "qpc.min_rnr_nak", "qpc.log_rra_max", "qpc.rre", "qpc.rwe",
          "qpc.rae", "qpc.atomic_mode", "qpc.mtu", "qpc.primary_address_path.hop_limit",
          "qpc.primary_address_path.flow_label", "qpc.primary_address_path.tclass"):
    expect("init2rtr_qp_in", f, REQUEST, "the modify call's attributes (RDMA CM computes a flow label and "
           "hop limit 64; nvme-rdma gives the access flags at RTR, the pingpongs at INIT)")
for f in ("qpc.rre", "qpc.rwe", "qpc.rae", "qpc.q_key", "qpc.primary_address_path.pkey_index"):
    expect("rst2init_qp_in", f, REQUEST, "the modify call's access flags, Q_Key and P_Key index")
for f in ("qpc.next_send_psn", "qpc.primary_address_path.ack_timeout", "qpc.retry_count", "qpc.rnr_retry",
          "qpc.log_sra_max", "opt_param_mask"):
    expect("rtr2rts_qp_in", f, REQUEST, "the modify call's PSN, timeout, retries and read depth (IPoIB gives "
           "its Q_Key at every transition: the Q_Key optional parameter)")
for f in ("memory_key_mkey_entry.start_addr", "memory_key_mkey_entry.len", "memory_key_mkey_entry.lw",
          "memory_key_mkey_entry.lr", "memory_key_mkey_entry.rw", "memory_key_mkey_entry.rr",
          "memory_key_mkey_entry.translations_octword_size"):
    expect("create_mkey_in", f, REQUEST, "the region and its access (a Linux cache key gets both by UMR later)")

# Linux builds the whole QP context for every transition (qp.c __mlx5_ib_modify_qp: PD, CQs,
# port, the ACK request frequency, and the type, MTU and message size of a UD QP); a
# transition takes only its own fields (the PRM's QP state table), which are all cxv sends.
for lay in TRANSITIONS:
    for f in ("qpc.pd", "qpc.cqn_snd", "qpc.cqn_rcv", "qpc.pm_state", "qpc.st", "qpc.mtu", "qpc.log_msg_max",
              "qpc.dbr_addr", "qpc.rlky", "qpc.log_ack_req_freq", "qpc.primary_address_path.vhca_port_num"):
        # RTR2RTS takes the ACK request frequency: compared there (both drivers give 8).
        if classify(lay, f)[0] is None and not (lay == "rtr2rts_qp_in" and f == "qpc.log_ack_req_freq"):
            expect(lay, f, CARRIED, "Linux writes its whole context at every transition")

# The differences that are choices, each with its reason (docs/linux-oracle.md, "The
# differential check"). Each must still differ in the run.
expect("create_qp_in", "qpc.fre", DIFFERS,
       "Linux enables fast registration on every kernel QP (qp.c create_kernel_qp); cxv posts no UMR or "
       "fast-registration WQE, which a card then refuses")
expect("create_qp_in", "qpc.rlky", DIFFERS,
       "Linux lets its kernel QPs use the reserved lkey; cxv's WQEs carry memory keys it made")
expect("create_qp_in", "qpc.user_index", DIFFERS,
       "Linux's kernel QPs carry MLX5_IB_DEFAULT_UIDX (0xffffff); cxv gives 0, its CQEs' user index unused")
expect("create_qp_in", "qpc.srqn_rmpn_xrqn", DIFFERS,
       "Linux names its device's default SRQ and XRC domain in a QP without an SRQ (qp.c \"Set default "
       "resources\"); cxv leaves both 0 for a receive queue of its own (rq_type 0), which names neither")
expect("create_qp_in", "qpc.xrcd", DIFFERS, "the same")
expect("create_mkey_in", "memory_key_mkey_entry.free", DIFFERS,
       "Linux's MR cache makes free keys with UMR enabled and fills them with UMR WQEs (finding 16); cxv "
       "makes a key with its translation in one command, as Linux's reg_create does for an MR its cache "
       "does not hold")
expect("create_mkey_in", "memory_key_mkey_entry.umr_en", DIFFERS, "the same")
expect("create_mkey_in", "translations_octword_actual_size", DIFFERS, "the same: cxv's translation inline")
expect("create_mkey_in", "klm_pas_mtt[]", DIFFERS, "the same")
expect("init2rtr_qp_in", "qpc.primary_address_path.grh", DIFFERS,
       "on RoCE Linux leaves grh clear (qp.c mlx5_set_path sets it for InfiniBand paths only); cxv sets "
       "it on every RoCE path, whose packets always carry the GRH's fields", roce_only=True)
expect("init2rtr_qp_in", "qpc.primary_address_path.udp_sport", DIFFERS,
       "Linux picks each RC QP's RoCE v2 UDP source port from the two QP numbers (entropy for ECMP); "
       "cxv leaves 0", roce_only=True)
expect("init2rtr_qp_in", "qpc.primary_address_path.rmac_47_32", PEER,
       "the peer's MAC: Linux's from its neighbour table (RDMA CM), cxv's from its own ARP (finding 19, "
       "api/neighbours.h); a card sends to it as given")
expect("init2rtr_qp_in", "qpc.primary_address_path.rmac_31_0", PEER, "the same")
expect("init2rtr_qp_in", "qpc.primary_address_path.rlid", PEER,
       "the peer's LID on InfiniBand (RDMA CM's from the SA's PathRecord, the pingpong's from the peer): "
       "each run's own; 0 on RoCE")

# A basic SRQ: both drivers make it as an RMP at ISSI 1 (CREATE_RMP: the RMP context with
# its receive WQ; Linux's srq_cmd.c sends CREATE_SRQ only at ISSI 0). Compared field by
# field as any other command.
expect("create_rmp_in", "uid", ALLOCATED, "a DevX user's id (0: the kernel's own objects)")
for f in ("ctx.wq.pas[]", "ctx.wq.pd", "ctx.wq.dbr_addr", "ctx.wq.log_wq_pg_sz", "ctx.wq.page_offset"):
    expect("create_rmp_in", f, ALLOCATED, "the RMP's buffer, doorbell record and PD")
expect("create_rmp_in", "ctx.wq.log_wq_sz", REQUEST, "the SRQ's size")


def compare_srq(linux_cmd, cxv_cmd, problems, report):
    if cxv_cmd[0] != linux_cmd[0]:
        problems.append(f"SRQ: Linux {linux_cmd[0]} (an RMP, as at ISSI 1), cxv {cxv_cmd[0]}")
        return
    compare("SRQ", linux_cmd, cxv_cmd, problems, set(), report)


# --- The comparison ------------------------------------------------------------------

def compare(kind, linux_cmd, cxv_cmd, problems, seen_differs, report):
    lay = linux_cmd[0]
    lf, lu = linux_cmd[1], linux_cmd[2]
    cf, cu = cxv_cmd[1], cxv_cmd[2]
    report.append(f"{kind}: {lay}")
    for field in sorted(set(lf) | set(cf)):
        a, b = lf.get(field, 0), cf.get(field, 0)
        cls, entry = classify(lay, field)
        if cls in (REQUEST, CARRIED):
            if a != b:
                why = "as asked" if cls == REQUEST else "Linux's whole context"
                report.append(f"  {field}: Linux {a:#x}, cxv {b:#x} ({why})")
            continue
        if cls == ALLOCATED:
            continue  # each driver's own (an array: whether it is given at all, below)
        if cls == PEER:
            if (a != 0) != (b != 0):
                problems.append(f"{kind} {lay}.{field}: given by {'Linux' if a else 'cxv'} only")
            continue
        if a == b:
            continue
        if cls == DIFFERS:
            seen_differs.add((lay, entry))
            report.append(f"  {field}: Linux {a:#x}, cxv {b:#x} (a known difference)")
            continue
        problems.append(f"{kind} {lay}.{field}: Linux {a:#x}, cxv {b:#x}, and docs do not say why")
    # An allocated array (a buffer's page list, a peer's GID) is given by both or by neither.
    for lay2, f, cls, _ in EXPECTED:
        if lay2 == lay and cls == ALLOCATED and f.endswith("[]"):
            name = f[:-2]
            has = [any(re.sub(r"\[\d+\]$", "", k) == name for k in side) for side in (lf, cf)]
            if has[0] != has[1]:
                problems.append(f"{kind} {lay}.{f}: given by {'Linux' if has[0] else 'cxv'} only")
    for side, u in (("Linux", lu), ("cxv", cu)):
        if u:
            cls, entry = classify(lay, "unnamed")
            if cls == DIFFERS:
                seen_differs.add((lay, entry))
                report.append(f"  bits no field names, set by {side}: {sorted(u.items())} (a known difference)")
            else:
                problems.append(f"{kind} {lay}: {side} sets bits no field of hw/ names: {sorted(u.items())}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("linux", nargs="+")
    ap.add_argument("--cxv", required=True, nargs="+")
    ap.add_argument("--report")
    ap.add_argument("--link", choices=("eth", "ib"), default="eth")
    args = ap.parse_args()
    linux, cxv = log(args.linux), log(args.cxv)
    problems, report, seen = [], [], set()

    def pick(kind, lx, cx):
        if not lx or not cx:
            problems.append(f"{kind}: none in the {'Linux' if not lx else 'cxv'} log")
            return None
        return lx, cx

    # EQs: Linux's last (a completion EQ), cxv's last (its completion EQ).
    if pick("EQ", linux.eqs, cxv.eqs):
        compare("EQ", linux.eqs[-1], cxv.eqs[-1], problems, seen, report)
    if pick("CQ", linux.cqs, cxv.cqs):
        compare("CQ", linux.cqs[-1], cxv.cqs[-1], problems, seen, report)
    if pick("memory key", linux.mkeys, cxv.mkeys):
        compare("memory key", linux.mkeys[-1], cxv.mkeys[-1], problems, seen, report)
    if pick("SRQ", linux.srqs, cxv.srqs):
        compare_srq(linux.srqs[-1], cxv.srqs[-1], problems, report)
    for st, kind in ((0x0, "RC QP"), (0x2, "UD QP")):
        lq, cq = linux.qps_of(st), cxv.qps_of(st)
        if not pick(kind, lq, cq):
            continue
        l, c = lq[-1]["commands"], cq[-1]["commands"]
        lo, co = [x[0] for x in l], [x[0] for x in c]
        report.append(f"{kind} commands: Linux {' '.join(lo)}; cxv {' '.join(co)}")
        for cmd in l:
            match = [x for x in c if x[0] == cmd[0]]
            if match:
                compare(kind, cmd, match[0], problems, seen, report)
    for lay, f, cls, why in EXPECTED:
        if cls == DIFFERS and (lay, f) not in seen and not (args.link == "ib" and (lay, f) in ROCE_ONLY):
            problems.append(f"{lay}.{f}: the table says the drivers differ ({why}), but they did not")
    out = "\n".join(report + [""] + [f"PROBLEM: {p}" for p in problems]) + "\n"
    if args.report:
        with open(args.report, "w") as f:
            f.write(out)
    sys.stdout.write(out)
    print(f"differential: {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

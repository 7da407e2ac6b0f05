// How the tests run tshark on the model's captures.
#pragma once

namespace cxv::test {

// Checksum validation on, so that a wrong checksum is an error. Wireshark's heuristic
// dissectors of InfiniBand payloads (RPC-over-RDMA, Mellanox EoIB, Ethernet over IB, SMC-R,
// SMB Direct, NVMe-oF, LNet, iSER, FCoIB, SDP) claim SEND payloads by a guess and report
// "Malformed" when the bytes are not their protocol (an empty SEND included): off.
inline constexpr const char* tshark_command =
    "tshark -o ip.check_checksum:TRUE -o udp.check_checksum:TRUE"
    " --disable-heuristic rpcrdma_infiniband --disable-heuristic mellanox_eoib"
    " --disable-heuristic eth_over_ib --disable-heuristic smcr_infiniband"
    " --disable-heuristic smb_direct_infiniband --disable-heuristic nvme_rdma --disable-heuristic lnet_ib"
    " --disable-heuristic iser_infiniband --disable-heuristic fc_infiniband --disable-heuristic sdp_infiniband ";

}  // namespace cxv::test

// cxv list: every mlx5 function on the machine (libpci), with its driver, IOMMU group
// and NUMA node, and whether cxv can open it as it stands.
#pragma once

namespace cxv::tool {

int print_list(bool json);

}  // namespace cxv::tool

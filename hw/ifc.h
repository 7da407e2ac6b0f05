// Every PRM command and context layout of hw/, and the list of them all.
#pragma once

#include "hw/ifc_cmd.h"
#include "hw/ifc_counters.h"
#include "hw/ifc_eth.h"
#include "hw/ifc_flow.h"
#include "hw/ifc_hca.h"
#include "hw/ifc_qp.h"
#include "hw/ifc_reg.h"
#include "hw/ifc_resources.h"

// X(C++ name, PRM name) for every layout declared with CXV_IFC_LAYOUT; the conformance
// test checks each against Linux's mlx5_ifc_<PRM name>_bits.
#define CXV_IFC_LAYOUTS(X)       \
    CXV_IFC_LAYOUTS_CMD(X)       \
    CXV_IFC_LAYOUTS_HCA(X)       \
    CXV_IFC_LAYOUTS_REG(X)       \
    CXV_IFC_LAYOUTS_RESOURCES(X) \
    CXV_IFC_LAYOUTS_QP(X)        \
    CXV_IFC_LAYOUTS_COUNTERS(X)  \
    CXV_IFC_LAYOUTS_ETH(X)       \
    CXV_IFC_LAYOUTS_FLOW(X)

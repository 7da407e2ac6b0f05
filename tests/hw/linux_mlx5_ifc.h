// Linux's include/linux/mlx5/mlx5_ifc.h (6.1, made digestible for C++ by
// //tests/hw:linux_mlx5_ifc_cxx) with the kernel types and macros it expects declared
// first. Every test that reads Linux's layouts includes this, not linux/mlx5_ifc.h.
#pragma once
#include <cstdint>

typedef std::uint8_t u8;
typedef std::uint16_t u16;
typedef std::uint32_t u32;
typedef std::uint64_t u64;
#ifndef BIT
#define BIT(n) (1UL << (n))
#define BIT_ULL(n) (1ULL << (n))
#endif
#ifndef __packed
#define __packed __attribute__((packed))
#endif
#include "tests/hw/linux/mlx5_ifc.h"

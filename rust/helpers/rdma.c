// SPDX-License-Identifier: GPL-2.0

#include <linux/percpu.h>
#include <net/netlink.h>
#include <rdma/ib_umem.h>
#include <rdma/ib_verbs.h>
#include <rdma/iter.h>
#include <rdma/uverbs_ioctl.h>

bool rust_helper_ib_device_try_get(struct ib_device *dev)
{
	return ib_device_try_get(dev);
}

struct ib_udata *rust_helper_uverbs_attr_bundle_udata(struct uverbs_attr_bundle *attrs)
{
	return &attrs->driver_udata;
}

struct ib_ucontext *rust_helper_uverbs_attr_bundle_context(struct uverbs_attr_bundle *attrs)
{
	return attrs->context;
}

struct uverbs_attr_bundle *rust_helper_uverbs_attr_bundle_of_udata(struct ib_udata *udata)
{
	return container_of(udata, struct uverbs_attr_bundle, driver_udata);
}

u64 rust_helper_ib_dma_map_single(struct ib_device *dev, void *cpu_addr, size_t size,
				  enum dma_data_direction direction)
{
	return ib_dma_map_single(dev, cpu_addr, size, direction);
}

void rust_helper_ib_dma_unmap_single(struct ib_device *dev, u64 addr, size_t size,
				     enum dma_data_direction direction)
{
	ib_dma_unmap_single(dev, addr, size, direction);
}

int rust_helper_ib_dma_mapping_error(struct ib_device *dev, u64 dma_addr)
{
	return ib_dma_mapping_error(dev, dma_addr);
}

void rust_helper_ib_dma_sync_single_for_cpu(struct ib_device *dev, u64 addr, size_t size,
					    enum dma_data_direction dir)
{
	ib_dma_sync_single_for_cpu(dev, addr, size, dir);
}

void rust_helper_ib_dma_sync_single_for_device(struct ib_device *dev, u64 addr, size_t size,
					       enum dma_data_direction dir)
{
	ib_dma_sync_single_for_device(dev, addr, size, dir);
}

int rust_helper_ib_post_send(struct ib_qp *qp, const struct ib_send_wr *send_wr,
			     const struct ib_send_wr **bad_send_wr)
{
	return ib_post_send(qp, send_wr, bad_send_wr);
}

int rust_helper_ib_post_recv(struct ib_qp *qp, const struct ib_recv_wr *recv_wr,
			     const struct ib_recv_wr **bad_recv_wr)
{
	return ib_post_recv(qp, recv_wr, bad_recv_wr);
}

u32 rust_helper_ib_inc_rkey(u32 rkey)
{
	return ib_inc_rkey(rkey);
}

void rust_helper_ib_update_fast_reg_key(struct ib_mr *mr, u8 newkey)
{
	ib_update_fast_reg_key(mr, newkey);
}

void rust_helper_sg_dma_set(struct scatterlist *sg, dma_addr_t addr, unsigned int len)
{
	sg_dma_address(sg) = addr;
	sg_dma_len(sg) = len;
}

dma_addr_t rust_helper_sg_dma_address(const struct scatterlist *sg)
{
	return sg_dma_address(sg);
}

unsigned int rust_helper_sg_dma_len(const struct scatterlist *sg)
{
	return sg_dma_len(sg);
}

struct ib_device *rust_helper_rdma_device_to_ibdev(struct device *device)
{
	return rdma_device_to_ibdev(device);
}

void rust_helper___rdma_umem_block_iter_start(struct ib_block_iter *biter, struct ib_umem *umem,
					      unsigned long pgsz)
{
	__rdma_umem_block_iter_start(biter, umem, pgsz);
}

bool rust_helper___rdma_umem_block_iter_next(struct ib_block_iter *biter)
{
	return __rdma_umem_block_iter_next(biter);
}

dma_addr_t rust_helper_rdma_block_iter_dma_address(struct ib_block_iter *biter)
{
	return rdma_block_iter_dma_address(biter);
}

void rust_helper_sg_set_page(struct scatterlist *sg, struct page *page, unsigned int len,
			     unsigned int offset)
{
	sg_set_page(sg, page, len, offset);
}

int rust_helper_ib_dma_map_sg(struct ib_device *dev, struct scatterlist *sg, int nents,
			      enum dma_data_direction direction)
{
	return ib_dma_map_sg(dev, sg, nents, direction);
}

void rust_helper_ib_dma_unmap_sg(struct ib_device *dev, struct scatterlist *sg, int nents,
				 enum dma_data_direction direction)
{
	ib_dma_unmap_sg(dev, sg, nents, direction);
}

void rust_helper_ib_dma_sync_sg_for_cpu(struct ib_device *dev, struct scatterlist *sg,
					int nents, enum dma_data_direction dir)
{
	/* As ib_dma_sync_single_for_cpu(): software devices address kernel memory directly. */
	if (!ib_uses_virt_dma(dev))
		dma_sync_sg_for_cpu(dev->dma_device, sg, nents, dir);
}

/* The per-CPU counters of `kernel::rdma::provider::hw_stats::PerCpuCounters`. */

u64 __percpu *rust_helper_rdma_counters_alloc(size_t len)
{
	return __alloc_percpu_gfp(len * sizeof(u64), sizeof(u64), GFP_KERNEL);
}

void rust_helper_rdma_counters_add(u64 __percpu *counters, size_t index, u64 n)
{
	this_cpu_add(counters[index], n);
}

u64 rust_helper_rdma_counters_sum(u64 __percpu *counters, size_t index)
{
	u64 sum = 0;
	int cpu;

	for_each_possible_cpu(cpu)
		sum += READ_ONCE(*per_cpu_ptr(&counters[index], cpu));
	return sum;
}

/* The nest of a resource's driver attributes (`kernel::rdma::provider::restrack`). */

struct nlattr *rust_helper_nla_nest_start_noflag(struct sk_buff *skb, int attrtype)
{
	return nla_nest_start_noflag(skb, attrtype);
}

int rust_helper_nla_nest_end(struct sk_buff *skb, struct nlattr *start)
{
	return nla_nest_end(skb, start);
}

void rust_helper_nla_nest_cancel(struct sk_buff *skb, struct nlattr *start)
{
	nla_nest_cancel(skb, start);
}

// SPDX-License-Identifier: GPL-2.0

#include <linux/xarray.h>

/* An allocating XArray (indices from 1) whose lock disables bottom halves. */
void rust_helper_xa_init_alloc1_bh(struct xarray *xa)
{
	xa_init_flags(xa, XA_FLAGS_ALLOC1 | XA_FLAGS_LOCK_BH);
}

int rust_helper_xa_alloc_cyclic_bh(struct xarray *xa, u32 *id, void *entry, u32 min, u32 max,
				   u32 *next, gfp_t gfp)
{
	return xa_alloc_cyclic_bh(xa, id, entry, XA_LIMIT(min, max), next, gfp);
}

void *rust_helper_xa_erase_bh(struct xarray *xa, unsigned long index)
{
	return xa_erase_bh(xa, index);
}

void rust_helper_xa_lock_bh(struct xarray *xa)
{
	xa_lock_bh(xa);
}

void rust_helper_xa_unlock_bh(struct xarray *xa)
{
	xa_unlock_bh(xa);
}

/* The first present entry at or after *index, which is set to its index; NULL if none. */
void *rust_helper_xa_find_present(struct xarray *xa, unsigned long *index)
{
	return xa_find(xa, index, ULONG_MAX, XA_PRESENT);
}

/* An allocating XArray (indices from 1) whose lock disables interrupts. */
void rust_helper_xa_init_alloc1_irq(struct xarray *xa)
{
	xa_init_flags(xa, XA_FLAGS_ALLOC1 | XA_FLAGS_LOCK_IRQ);
}

int rust_helper_xa_alloc_cyclic_irq(struct xarray *xa, u32 *id, void *entry, u32 min, u32 max,
				    u32 *next, gfp_t gfp)
{
	return xa_alloc_cyclic_irq(xa, id, entry, XA_LIMIT(min, max), next, gfp);
}

int rust_helper_xa_insert_bh(struct xarray *xa, unsigned long index, void *entry, gfp_t gfp)
{
	return xa_insert_bh(xa, index, entry, gfp);
}

int rust_helper_xa_insert_irq(struct xarray *xa, unsigned long index, void *entry, gfp_t gfp)
{
	return xa_insert_irq(xa, index, entry, gfp);
}

void *rust_helper_xa_erase_irq(struct xarray *xa, unsigned long index)
{
	return xa_erase_irq(xa, index);
}

unsigned long rust_helper_xa_lock_irqsave(struct xarray *xa)
{
	unsigned long flags;

	xa_lock_irqsave(xa, flags);
	return flags;
}

void rust_helper_xa_unlock_irqrestore(struct xarray *xa, unsigned long flags)
{
	xa_unlock_irqrestore(xa, flags);
}

// SPDX-License-Identifier: GPL-2.0

#include <linux/timer.h>
#include <linux/workqueue.h>

/* INIT_DELAYED_WORK with the work's lockdep name and class given by the caller. */
void rust_helper_init_delayed_work_with_key(struct delayed_work *dwork, work_func_t func,
					    const char *name, struct lock_class_key *key)
{
	__init_work(&dwork->work, false);
	dwork->work.data = (atomic_long_t)WORK_DATA_INIT();
	lockdep_init_map(&dwork->work.lockdep_map, name, key, 0);
	INIT_LIST_HEAD(&dwork->work.entry);
	dwork->work.func = func;
	timer_setup(&dwork->timer, delayed_work_timer_fn, TIMER_IRQSAFE);
}

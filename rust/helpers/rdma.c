// SPDX-License-Identifier: GPL-2.0

#include <rdma/ib_verbs.h>
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

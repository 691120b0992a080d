/* Transfer templates and their posts by block lists (template.c). */
#ifndef KVT_TEMPLATE_H
#define KVT_TEMPLATE_H

#include "kvreuse_transport.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct kvt_agent kvt_agent;
struct kvt_op;
struct kvt_expansion;

/* (P) Refills op->descs with the next pieces of a template post; false when every piece was issued. */
bool kvt_expansion_refill(struct kvt_op *op);
void kvt_expansion_free(kvt_agent *agent, struct kvt_expansion *expansion);
/* Frees every registered template of a destroyed agent. */
void kvt_templates_free_all(kvt_agent *agent);

#endif

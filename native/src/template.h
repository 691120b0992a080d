/* Transfer templates and their posts by block lists (template.c). */
#ifndef KVT_TEMPLATE_H
#define KVT_TEMPLATE_H

#include "kvreuse_transport.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct kvt_agent kvt_agent;
/* Frees every registered template of a destroyed agent. */
void kvt_templates_free_all(kvt_agent *agent);

#endif

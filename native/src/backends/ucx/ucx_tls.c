/* UCX_TLS as UCX 1.13 reads it (ucs_config_sscanf_allow_list, ucp_is_resource_in_transports_list): a comma-separated
 * list of names; a leading '^' negates the whole list; "all" as its first name allows every transport. A name is a
 * transport's own, or an alias standing for several; a leading '\' takes it as a transport's own name only, and a
 * ":aux" suffix allows a transport for wire-up only (still used). A transport a negated list names through an alias
 * only as an auxiliary one stays in. */
#include "backends/ucx/ucx_tls.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The longest value ucp_config_print prints whole: its buffer holds 128 bytes, less '=', the NUL and snprintf's own. */
#define PRINTED_VALUE_MAX 124

typedef struct {
    const char *name;
    const char *transports[6]; /* NULL-terminated; ":aux" marks one the alias allows for wire-up only */
} tls_alias;

/* UCX 1.13's ucp_tl_aliases. */
static const tls_alias aliases[] = {
    {"mm", {"posix", "sysv", "xpmem", NULL}},
    {"sm", {"posix", "sysv", "xpmem", "knem", "cma", NULL}},
    {"shm", {"posix", "sysv", "xpmem", "knem", "cma", NULL}},
    {"ib", {"rc_verbs", "ud_verbs", "rc_mlx5", "ud_mlx5", "dc_mlx5", NULL}},
    {"ud_v", {"ud_verbs", NULL}},
    {"ud_x", {"ud_mlx5", NULL}},
    {"ud", {"ud_mlx5", "ud_verbs", NULL}},
    {"rc_v", {"rc_verbs", "ud_verbs:aux", NULL}},
    {"rc_x", {"rc_mlx5", "ud_mlx5:aux", NULL}},
    {"rc", {"rc_mlx5", "ud_mlx5:aux", "rc_verbs", "ud_verbs:aux", NULL}},
    {"dc", {"dc_mlx5", "ud_mlx5:aux", NULL}},
    {"dc_x", {"dc_mlx5", "ud_mlx5:aux", NULL}},
    {"ugni", {"ugni_smsg", "ugni_udt:aux", "ugni_rdma", NULL}},
    {"cuda", {"cuda_copy", "cuda_ipc", "gdr_copy", NULL}},
    {"rocm", {"rocm_copy", "rocm_ipc", "rocm_gdr", NULL}},
};

/* Whether `entry` (`length` bytes, not terminated) is `name` itself or `name:aux`. */
static bool entry_is(const char *entry, size_t length, const char *name) {
    size_t name_length = strlen(name);
    if (length < name_length || strncmp(entry, name, name_length) != 0) return false;
    return length == name_length || (length == name_length + 4 && strncmp(entry + name_length, ":aux", 4) == 0);
}

/* Whether the comma-separated `list` names `name`; `own_name` also takes the '\'-prefixed form (a transport's own
 * name, not an alias's). Empty entries are skipped, as strtok skips them in UCX. */
static bool list_names(const char *list, const char *name, bool own_name) {
    for (const char *entry = list; *entry;) {
        size_t length = strcspn(entry, ",");
        if (entry_is(entry, length, name) || (own_name && entry[0] == '\\' && entry_is(entry + 1, length - 1, name)))
            return true;
        entry += length;
        if (*entry == ',') entry++;
    }
    return false;
}

/* Whether `alias` stands for `transport`, and (*out_aux) only for wire-up. */
static bool alias_covers(const tls_alias *alias, const char *transport, bool *out_aux) {
    size_t length = strlen(transport);
    for (const char *const *member = alias->transports; *member; member++) {
        if (strncmp(*member, transport, length) != 0) continue;
        if ((*member)[length] == '\0' || strcmp(*member + length, ":aux") == 0) {
            *out_aux = (*member)[length] != '\0';
            return true;
        }
    }
    return false;
}

bool ucx_tls_uses(const char *tls, const char *transport) {
    if (!tls) return true;
    bool negated = tls[0] == '^';
    const char *list = tls + negated;
    const char *first = list + strspn(list, ",");
    if (strcspn(first, ",") == 3 && strncmp(first, "all", 3) == 0) return true;
    if (list_names(list, transport, true)) return !negated;
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++) {
        bool aux = false;
        if (!alias_covers(&aliases[i], transport, &aux) || !list_names(list, aliases[i].name, false)) continue;
        if (!negated) return true;
        if (!aux) return false;
    }
    return negated;
}

bool ucx_tls_read(const ucp_config_t *config, const char *own, char *out, size_t size, const char **out_tls) {
    *out_tls = own[0] ? own : getenv("UCX_TLS");
    if (*out_tls) return true;
    char *printed = NULL;
    size_t printed_length = 0;
    FILE *stream = open_memstream(&printed, &printed_length);
    if (!stream) return false;
    ucp_config_print(config, stream, NULL, UCS_CONFIG_PRINT_CONFIG);
    if (fclose(stream) != 0) {
        free(printed);
        return false;
    }
    static const char name[] = "UCX_TLS=";
    const char *line = printed;
    while (line && strncmp(line, name, sizeof name - 1) != 0) {
        line = strchr(line, '\n');
        if (line) line++;
    }
    size_t length = line ? strcspn(line + sizeof name - 1, "\n") : 0;
    if (line && length <= PRINTED_VALUE_MAX && length < size) {
        memcpy(out, line + sizeof name - 1, length);
        out[length] = '\0';
        *out_tls = out;
    }
    free(printed);
    return true;
}

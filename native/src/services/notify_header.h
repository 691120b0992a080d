/* The header a notification carries between processes (notify_header.c). */
#ifndef KVT_NOTIFY_HEADER_H
#define KVT_NOTIFY_HEADER_H

#include "kvreuse_transport.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KVT_NOTIFY_HEADER_FIXED 6u /* u32 magic + u16 name length */
/* Writes the header naming `sender` (at most KVT_MAX_NAME bytes) into `buffer`; returns its size. */
size_t kvt_notify_header_write(uint8_t *buffer, const char *sender);
/* Whether `header` is a well-formed header, with its sender (printable ASCII) copied out. */
bool kvt_notify_header_parse(const uint8_t *header, size_t header_length, char sender[KVT_MAX_NAME + 1]);

#endif

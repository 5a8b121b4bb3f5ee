/* wiretext.h — the text form of a message (udp/text.go: "<Type>
 * field=value …", as in the vector files), read and written by the
 * generated message table, for the C tests: the wire vectors and the hook
 * core's scenarios. */
#ifndef FIKIT_WIRETEXT_H
#define FIKIT_WIRETEXT_H

#include <stddef.h>

#include "wire.h"

/* Storage for what parsed messages point to (strings, records, launches);
 * wt_reset empties it. */
void wt_reset(void);

/* Parse text (modified) into *m: an fk_msg_out for a hook → daemon type, an
 * fk_msg_in for a daemon → hook one (m must have room for either). Every
 * required field must be given. Returns the type, or -1 with why on stderr. */
int wt_parse(char *text, void *m);

/* The text form of message m of type (fk_msg_out or fk_msg_in by its
 * direction): fields in wire order, trailing optional zeros left out. */
void wt_format(char *buf, size_t cap, int type, const void *m);

/* The type called name, or -1. */
int wt_type(const char *name);

#endif

#ifndef PEERKIT_CAVAHI_SHIM_H
#define PEERKIT_CAVAHI_SHIM_H
// Avahi's client API as PeerKit's discovery layer sees it. Only Sources/PeerKit/Discovery/Avahi
// imports this module.
#include <avahi-client/client.h>
#include <avahi-client/lookup.h>
#include <avahi-client/publish.h>
#include <avahi-common/thread-watch.h>
#include <avahi-common/watch.h>
#include <avahi-common/timeval.h>
#include <avahi-common/error.h>
#include <avahi-common/malloc.h>
#include <avahi-common/alternative.h>
#include <avahi-common/strlst.h>
#include <avahi-common/address.h>

// AvahiPoll is a table of function pointers; these wrappers give Swift plain functions that take
// a relative delay in milliseconds instead of an absolute struct timeval.

/// Creates a timeout on `poll` that fires once, `milliseconds` from now.
static inline AvahiTimeout *peerkit_avahi_timeout_new(const AvahiPoll *poll, unsigned milliseconds,
                                                      AvahiTimeoutCallback callback, void *userdata) {
    struct timeval when;
    avahi_elapse_time(&when, milliseconds, 0);
    return poll->timeout_new(poll, &when, callback, userdata);
}

/// Re-arms `timeout` to fire once, `milliseconds` from now.
static inline void peerkit_avahi_timeout_update(const AvahiPoll *poll, AvahiTimeout *timeout, unsigned milliseconds) {
    struct timeval when;
    avahi_elapse_time(&when, milliseconds, 0);
    poll->timeout_update(timeout, &when);
}

/// Frees `timeout`; it does not fire afterwards.
static inline void peerkit_avahi_timeout_free(const AvahiPoll *poll, AvahiTimeout *timeout) {
    poll->timeout_free(timeout);
}
#endif

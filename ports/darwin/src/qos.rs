//! The worker threads' QoS class (the crate doc says why).

/// Asks for the user-initiated QoS class. It is a scheduling hint: if the
/// call fails (a sandbox or an older system), the thread runs at the
/// default class, which is correct, only slower on some cores.
pub(crate) fn set_worker_qos() {
    if cfg!(miri) {
        return; // Miri does not model QoS classes
    }
    // SAFETY: applies to the calling thread only; no pointers involved.
    let _ = unsafe { libc::pthread_set_qos_class_self_np(libc::qos_class_t::QOS_CLASS_USER_INITIATED, 0) };
}

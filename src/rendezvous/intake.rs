//! Taking HTTP requests in so that slow clients starve nobody.
//!
//! A worker that reads a connection's head itself can be held by a client
//! that trickles a byte at a time: a few dozen such connections hold every
//! worker and every read fails. So no worker ever waits on a client here.
//! One thread accepts; one thread reads every pending connection's head as
//! its bytes come (poll(2), non-blocking reads), each within
//! [`HEAD_DEADLINE`] counted from its accept; only a complete head goes to
//! a worker, which then answers at once. On top of that:
//! - a connection whose head is already there when it is taken in (a
//!   request in one packet, as run B's read and run A's delivery are) goes
//!   to a worker at once, whatever the limits below;
//! - at most [`PER_ADDRESS`] pending connections per client address, and
//!   at most [`MAX_PENDING`] in all. A newcomer past either is never
//!   refused: the oldest pending one of its address (of all, for the
//!   total) is closed to make room, after its bytes so far are read (a
//!   head complete by then is served instead). So connections trickling
//!   from one address close each other, never hold places against a
//!   reader from the same address (a persistent runner, where runs A and
//!   B share one IP). Closing one younger than [`GRACE`] is recorded like
//!   a delivery turned away; an older one is a slow client;
//! - reads (`/v1/seen/…`) go to a queue of their own that workers serve
//!   first, so a flood of deliveries cannot delay a reader either.

use super::store::Store;
use std::collections::HashMap;
use std::io::Read;
use std::net::{IpAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender, SyncSender, TryRecvError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a client has, from its accept, to send its whole head.
pub const HEAD_DEADLINE: Duration = Duration::from_secs(5);
/// Pending connections (head not yet complete) per client address.
pub const PER_ADDRESS: usize = 16;
/// Pending connections in all.
pub const MAX_PENDING: usize = 2048;
/// How long an unfinished head may be young: closing one younger to make
/// room may turn away a delivery whose head is still on its way (counted
/// as such); one older is a slow client (a delivery's head is one packet,
/// sent with the connection). Two seconds allow a lost packet's
/// retransmission or two.
pub const GRACE: Duration = Duration::from_secs(2);
/// Workers answering complete heads.
const WORKERS: usize = 8;
/// Complete heads waiting for a worker, per queue.
const QUEUE: usize = 256;
/// How long the reader waits for bytes before looking at new connections
/// and deadlines again.
const TICK: Duration = Duration::from_millis(20);

/// A request whose head has arrived.
pub struct Request {
    pub conn: TcpStream,
    /// The head through its blank line, or `None` when it grew past the
    /// limit (then the answer is 431).
    pub head: Option<Vec<u8>>,
}

struct Pending {
    conn: TcpStream,
    addr: IpAddr,
    buf: Vec<u8>,
    since: Instant,
}

/// Serves HTTP on `listener` with `answer` (a complete head, from a
/// worker) until `stop`.
pub fn serve(
    listener: TcpListener,
    store: &Arc<Mutex<Store>>,
    stop: &Arc<AtomicBool>,
    max_head: usize,
    answer: impl Fn(Request) + Send + Sync + 'static,
) -> Vec<std::thread::JoinHandle<()>> {
    let (new_tx, new_rx) = std::sync::mpsc::channel::<TcpStream>();
    let (read_tx, read_rx) = std::sync::mpsc::sync_channel::<Request>(QUEUE);
    let (other_tx, other_rx) = std::sync::mpsc::sync_channel::<Request>(QUEUE);
    let queues = Arc::new(Mutex::new((read_rx, other_rx)));
    let answer = Arc::new(answer);
    let mut threads = Vec::new();
    for _ in 0..WORKERS {
        let (queues, answer, stop) = (queues.clone(), answer.clone(), stop.clone());
        threads.push(std::thread::spawn(move || work(&queues, &*answer, &stop)));
    }
    {
        let (stop, store) = (stop.clone(), store.clone());
        threads.push(std::thread::spawn(move || {
            read_heads(new_rx, read_tx, other_tx, &store, &stop, max_head)
        }));
    }
    let (stop, store) = (stop.clone(), store.clone());
    threads.push(std::thread::spawn(move || {
        accept(listener, new_tx, &store, &stop)
    }));
    threads
}

fn accept(listener: TcpListener, new: Sender<TcpStream>, store: &Mutex<Store>, stop: &AtomicBool) {
    for conn in listener.incoming() {
        if stop.load(Ordering::SeqCst) {
            return;
        }
        match conn {
            Ok(c) => {
                if new.send(c).is_err() {
                    return;
                }
            }
            // Out of descriptors: a connection the kernel queued may be a
            // delivery turned away, and a reader must learn of it; then
            // wait rather than spin.
            Err(_) => {
                crate::loopback::lock(store).dropped();
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

/// A worker: reads first, then anything else.
fn work(
    queues: &Mutex<(Receiver<Request>, Receiver<Request>)>,
    answer: &dyn Fn(Request),
    stop: &AtomicBool,
) {
    loop {
        let next = {
            let q = crate::loopback::lock(queues);
            match q.0.try_recv() {
                Ok(r) => Some(r),
                Err(TryRecvError::Disconnected) => return,
                Err(TryRecvError::Empty) => match q.1.recv_timeout(TICK) {
                    Ok(r) => Some(r),
                    Err(std::sync::mpsc::RecvTimeoutError::Timeout) => None,
                    Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return,
                },
            }
        };
        match next {
            Some(r) => answer(r),
            None if stop.load(Ordering::SeqCst) => return,
            None => {}
        }
    }
}

/// Whether a head is a read (`GET /v1/seen/…`): those are served first.
fn is_read(head: &[u8]) -> bool {
    head.starts_with(b"GET /v1/seen/")
}

/// What reading a pending connection came to.
enum Step {
    /// Its head is not complete yet (nothing more has arrived).
    Wait,
    /// Its head is complete, or `None` when it grew past the limit.
    Head(Option<Vec<u8>>),
    /// The client closed it, or it broke.
    Gone,
}

impl Pending {
    /// Reads what has arrived, never waiting: at most `max_head + 1`
    /// bytes in all, whatever the client sends.
    fn read(&mut self, max_head: usize) -> Step {
        let mut buf = [0u8; 1024];
        loop {
            let want = (max_head + 1).saturating_sub(self.buf.len());
            match self.conn.read(&mut buf[..want.clamp(1, 1024)]) {
                Ok(0) => return Step::Gone,
                Ok(n) => {
                    self.buf.extend_from_slice(&buf[..n]);
                    if let Some(end) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        self.buf.truncate(end + 4);
                        return Step::Head(Some(std::mem::take(&mut self.buf)));
                    } else if self.buf.len() > max_head {
                        return Step::Head(None);
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Step::Wait,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return Step::Gone,
            }
        }
    }
}

/// The reader's state: the pending connections, oldest first, and how
/// many each address has.
struct Intake<'a> {
    pending: Vec<Pending>,
    per_addr: HashMap<IpAddr, usize>,
    reads: SyncSender<Request>,
    others: SyncSender<Request>,
    store: &'a Mutex<Store>,
    max_head: usize,
}

/// The reader: every pending connection's head, as its bytes come.
fn read_heads(
    new: Receiver<TcpStream>,
    reads: SyncSender<Request>,
    others: SyncSender<Request>,
    store: &Mutex<Store>,
    stop: &AtomicBool,
    max_head: usize,
) {
    let mut intake = Intake {
        pending: Vec::new(),
        per_addr: HashMap::new(),
        reads,
        others,
        store,
        max_head,
    };
    while !stop.load(Ordering::SeqCst) {
        // New connections: served at once, within the limits, or closed.
        loop {
            match new.try_recv() {
                Ok(conn) => intake.admit(conn),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => return,
            }
        }
        intake.tick();
    }
}

impl Intake<'_> {
    /// Waits up to [`TICK`] for bytes, then reads what came: a complete
    /// head goes to a worker; a closed connection, or one past its
    /// deadline, is forgotten.
    fn tick(&mut self) {
        let fds: Vec<_> = self.pending.iter().map(|p| p.conn.as_raw_fd()).collect();
        let ready = if fds.is_empty() {
            std::thread::sleep(TICK);
            vec![]
        } else {
            crate::sys::poll::readable(&fds, TICK).unwrap_or_else(|_| vec![false; fds.len()])
        };
        let now = Instant::now();
        let pending = std::mem::take(&mut self.pending);
        for (mut p, ready) in pending
            .into_iter()
            .zip(ready.into_iter().chain(std::iter::repeat(false)))
        {
            let step = if ready {
                p.read(self.max_head)
            } else {
                Step::Wait
            };
            match step {
                Step::Wait if now.duration_since(p.since) <= HEAD_DEADLINE => self.pending.push(p),
                Step::Wait | Step::Gone => self.release(p.addr),
                Step::Head(head) => {
                    self.release(p.addr);
                    self.dispatch(p.conn, head);
                }
            }
        }
    }

    /// Takes a new connection in. Its head, if already here, is served
    /// without taking a place at all: a reader's request is one packet,
    /// there by the time the connection reaches this thread, and no limit
    /// may stand between it and a worker. Otherwise it waits in a place of
    /// its own, made by closing the oldest unfinished head of its address
    /// when that is at [`PER_ADDRESS`], or the oldest of all at
    /// [`MAX_PENDING`]. (Why not close the newcomer, as before: then
    /// connections that trickle their heads hold their address's places
    /// until their deadline, against everyone from there, run B's reads
    /// too; this way they close each other, and a newcomer is never
    /// refused.)
    fn admit(&mut self, conn: TcpStream) {
        let Ok(addr) = conn.peer_addr().map(|a| a.ip()) else {
            return;
        };
        if conn.set_nonblocking(true).is_err() {
            crate::loopback::lock(self.store).dropped();
            return;
        }
        let mut p = Pending {
            conn,
            addr,
            buf: Vec::new(),
            since: Instant::now(),
        };
        match p.read(self.max_head) {
            Step::Head(head) => return self.dispatch(p.conn, head),
            Step::Gone => return,
            Step::Wait => {}
        }
        if self.per_addr.get(&addr).copied().unwrap_or(0) >= PER_ADDRESS
            && let Some(i) = self.pending.iter().position(|q| q.addr == addr)
        {
            self.make_room(i);
        }
        if self.pending.len() >= MAX_PENDING {
            self.make_room(0);
        }
        *self.per_addr.entry(addr).or_insert(0) += 1;
        self.pending.push(p);
    }

    /// Frees pending place `i`. What has arrived on it is read first: a
    /// head complete by now is served, not closed (only unfinished heads
    /// make room). An unfinished one is closed; if it is younger than
    /// [`GRACE`] it may be a delivery whose head is still on its way, so a
    /// reader learns of it like any delivery turned away. One older has
    /// had ample time to send what a delivery sends in one packet: a slow
    /// client, closed as its deadline would close it, unrecorded.
    fn make_room(&mut self, i: usize) {
        let mut p = self.pending.remove(i);
        self.release(p.addr);
        match p.read(self.max_head) {
            Step::Head(head) => self.dispatch(p.conn, head),
            Step::Gone => {}
            Step::Wait if p.since.elapsed() >= GRACE => {}
            Step::Wait => crate::loopback::lock(self.store).dropped(),
        }
    }

    /// One place of `addr`'s given back.
    fn release(&mut self, addr: IpAddr) {
        if let Some(n) = self.per_addr.get_mut(&addr) {
            *n -= 1;
            if *n == 0 {
                self.per_addr.remove(&addr);
            }
        }
    }

    /// A complete head to the workers: reads to their own queue.
    fn dispatch(&self, conn: TcpStream, head: Option<Vec<u8>>) {
        let _ = conn.set_nonblocking(false);
        let read = head.as_deref().is_some_and(is_read);
        let req = Request { conn, head };
        let queue = if read { &self.reads } else { &self.others };
        // A full queue turns the request away, as a full backlog would;
        // a reader learns of it like any delivery turned away.
        if queue.try_send(req).is_err() {
            crate::loopback::lock(self.store).dropped();
        }
    }
}

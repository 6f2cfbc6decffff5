//! The function-call pass: nest the instruction layer into calls and returns using the binary's
//! symbols and, when available, instruction kinds from a disassembler.
//!
//! Rules, applied to each executed unit `a` after the previous instruction `p`:
//! * `p` is a call and `a` is not its fall-through: a call; push a frame returning to `p + len`.
//! * `a` equals the return address of a frame on the stack and control did not fall through to
//!   it: a return; pop down to that frame. This also catches returns from code filtered out of
//!   the trace (a PLT stub whose target is outside the main executable).
//! * `p` is a return with no frame to return to: the current frame returned into code outside
//!   the trace; pop it, and if `a` is a function entry, that code called it (a callback).
//! * otherwise a transfer to another function's entry is a tail call (the frame is replaced and
//!   counted as a call), and a transfer into the middle of another function replaces the frame
//!   without a call. Without instruction kinds a transfer to a function entry counts as a call.
//! * a gap forgets the previous instruction; the stack is kept.
//!
//! The pass streams ([`FunctionPass::push`]); [`CallTree`] collects its frames for export.

use rustc_hash::FxHashMap;

use crate::symbols::{CodeInfo, InsnKind};

/// A function seen by the pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionInfo {
    /// Entry address (the address of the first instruction seen, without a symbol).
    pub entry: u64,
    /// Symbol name, or `0x...` without one.
    pub name: String,
}

/// A completed frame: one execution of a function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame {
    /// Index into [`CallTree::functions`].
    pub function: u32,
    /// Instruction index of its first instruction.
    pub start: u64,
    /// Instruction index one past its last instruction.
    pub end: u64,
    /// Nesting depth (0 for a root frame).
    pub depth: u32,
    /// Whether it was entered by a (tail) call seen in the trace.
    pub called: bool,
}

/// A call seen in the trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallEvent {
    /// Instruction index of the callee's first instruction.
    pub at: u64,
    /// Address of the call instruction (the last instruction before the callee), 0 if unknown.
    pub site: u64,
    /// Index into [`CallTree::functions`].
    pub function: u32,
}

#[derive(Debug, Clone, Copy)]
struct Open {
    function: u32,
    start: u64,
    ret: Option<u64>,
    /// The call instruction's address when its length was unknown (heuristic returns).
    site: u64,
    called: bool,
}

const NO_FUNCTION: u64 = u64::MAX;

/// The streaming function pass.
pub struct FunctionPass<'c, C: CodeInfo + ?Sized> {
    code: &'c C,
    /// Functions by entry address.
    pub functions: Vec<FunctionInfo>,
    by_entry: FxHashMap<u64, u32>,
    stack: Vec<Open>,
    prev: Option<(u64, Option<crate::symbols::InsnInfo>)>,
    t: u64,
    /// Calls per function index.
    pub calls: Vec<u64>,
    /// Self instructions per function index.
    pub self_insns: Vec<u64>,
}

impl<'c, C: CodeInfo + ?Sized> FunctionPass<'c, C> {
    /// A pass over code described by `code`.
    pub fn new(code: &'c C) -> Self {
        FunctionPass {
            code,
            functions: Vec::new(),
            by_entry: FxHashMap::default(),
            stack: Vec::new(),
            prev: None,
            t: 0,
            calls: Vec::new(),
            self_insns: Vec::new(),
        }
    }

    fn function_id(&mut self, addr: u64) -> (u32, u64) {
        let (entry, name) = match self.code.function_at(addr) {
            Some(f) => (f.start, Some(f.name)),
            None => (NO_FUNCTION, None),
        };
        if let Some(&id) = self.by_entry.get(&entry) {
            return (id, entry);
        }
        let id = self.functions.len() as u32;
        self.functions.push(FunctionInfo {
            entry: if entry == NO_FUNCTION { 0 } else { entry },
            name: name
                .map(str::to_string)
                .unwrap_or_else(|| "[unknown]".to_string()),
        });
        self.by_entry.insert(entry, id);
        self.calls.push(0);
        self.self_insns.push(0);
        (id, entry)
    }

    fn pop(&mut self, on_frame: &mut impl FnMut(Frame)) {
        if let Some(o) = self.stack.pop() {
            on_frame(Frame {
                function: o.function,
                start: o.start,
                end: self.t,
                depth: self.stack.len() as u32,
                called: o.called,
            });
        }
    }

    fn call(&mut self, f: u32, ret: Option<u64>, site: u64, on_call: &mut impl FnMut(CallEvent)) {
        self.calls[f as usize] += 1;
        on_call(CallEvent {
            at: self.t,
            site,
            function: f,
        });
        self.stack.push(Open {
            function: f,
            start: self.t,
            ret,
            site: if ret.is_none() { site } else { 0 },
            called: true,
        });
    }

    /// Feed one unit: `insns` instructions starting at `addr`, or a gap (`insns == 0`).
    pub fn push(
        &mut self,
        addr: u64,
        insns: u64,
        gap: bool,
        on_frame: &mut impl FnMut(Frame),
        on_call: &mut impl FnMut(CallEvent),
    ) {
        if gap {
            self.prev = None;
            return;
        }
        let (f, entry) = self.function_id(addr);
        let is_entry = entry == addr;
        // Without instruction lengths a return lands within 15 bytes after the call site.
        let ret_frame = self.stack.iter().rposition(|o| {
            o.ret == Some(addr)
                || (o.ret.is_none() && o.site != 0 && addr > o.site && addr - o.site <= 15)
        });
        match self.prev {
            _ if self.stack.is_empty() => {
                self.stack.push(Open {
                    function: f,
                    start: self.t,
                    ret: None,
                    site: 0,
                    called: false,
                });
            }
            Some((pa, Some(info)))
                if info.kind == InsnKind::Call && addr != pa.wrapping_add(info.len as u64) =>
            {
                self.call(f, Some(pa.wrapping_add(info.len as u64)), pa, on_call);
            }
            prev => {
                let fell_through = match prev {
                    Some((pa, Some(info))) => {
                        info.kind != InsnKind::Return && addr == pa.wrapping_add(info.len as u64)
                    }
                    _ => false,
                };
                let was_return = matches!(prev, Some((_, Some(i))) if i.kind == InsnKind::Return);
                let top = self.stack.last().map(|o| o.function);
                if let (Some(i), false) = (ret_frame, fell_through) {
                    while self.stack.len() > i {
                        self.pop(on_frame);
                    }
                    if self.stack.is_empty() {
                        self.stack.push(Open {
                            function: f,
                            start: self.t,
                            ret: None,
                            site: 0,
                            called: false,
                        });
                    } else if top != Some(f) && self.stack.last().map(|o| o.function) != Some(f) {
                        self.replace(f, false, 0, on_frame, on_call);
                    }
                } else if was_return {
                    // Returned into code outside the trace.
                    self.pop(on_frame);
                    if is_entry {
                        self.call(f, None, 0, on_call);
                    } else if self.stack.is_empty()
                        || self.stack.last().map(|o| o.function) != Some(f)
                    {
                        self.replace(f, false, 0, on_frame, on_call);
                    }
                } else if fell_through {
                    if top != Some(f) {
                        self.replace(f, false, 0, on_frame, on_call);
                    }
                } else if is_entry && entry != NO_FUNCTION {
                    let site = prev.map(|p| p.0).unwrap_or(0);
                    let known_jump = matches!(prev, Some((_, Some(i))) if i.kind != InsnKind::Call);
                    if known_jump && top == Some(f) {
                        // A jump back to the function's own entry: a loop, not a call.
                    } else if known_jump || prev.is_none() {
                        self.replace(f, true, site, on_frame, on_call);
                    } else {
                        // No instruction kinds: a transfer to an entry is a call.
                        self.call(f, None, site, on_call);
                    }
                } else if top != Some(f) {
                    self.replace(f, false, 0, on_frame, on_call);
                }
            }
        }
        if let Some(top) = self.stack.last() {
            self.self_insns[top.function as usize] += insns;
        }
        self.prev = if insns == 1 {
            Some((addr, self.code.instruction(addr)))
        } else {
            Some((addr, None))
        };
        self.t += insns;
    }

    /// Replace the top frame by `f` (a tail call when `called`); the return address stays.
    fn replace(
        &mut self,
        f: u32,
        called: bool,
        site: u64,
        on_frame: &mut impl FnMut(Frame),
        on_call: &mut impl FnMut(CallEvent),
    ) {
        let (ret, old_site) = self
            .stack
            .last()
            .map(|o| (o.ret, o.site))
            .unwrap_or((None, 0));
        self.pop(on_frame);
        if called {
            self.calls[f as usize] += 1;
            on_call(CallEvent {
                at: self.t,
                site,
                function: f,
            });
        }
        self.stack.push(Open {
            function: f,
            start: self.t,
            ret,
            site: old_site,
            called,
        });
    }

    /// Close every open frame at the end of the trace.
    pub fn finish(&mut self, on_frame: &mut impl FnMut(Frame)) {
        while !self.stack.is_empty() {
            self.pop(on_frame);
        }
    }
}

/// The function pass's result for one thread.
#[derive(Debug, Clone, Default)]
pub struct CallTree {
    /// Functions seen.
    pub functions: Vec<FunctionInfo>,
    /// Frames in order of completion (children before parents).
    pub frames: Vec<Frame>,
    /// Calls in trace order.
    pub calls: Vec<CallEvent>,
    /// Calls per function.
    pub call_counts: Vec<u64>,
    /// Self instructions per function.
    pub self_insns: Vec<u64>,
}

impl CallTree {
    /// Run the function pass over a thread's instruction layer.
    pub fn build<C: CodeInfo + ?Sized>(layer0: &super::Layer, code: &C) -> CallTree {
        let mut pass = FunctionPass::new(code);
        let mut frames = Vec::new();
        let mut calls = Vec::new();
        for &u in &layer0.units {
            let d = &layer0.defs[u as usize];
            pass.push(
                d.first_addr,
                d.insns,
                d.gap.is_some(),
                &mut |f| frames.push(f),
                &mut |c| calls.push(c),
            );
        }
        pass.finish(&mut |f| frames.push(f));
        CallTree {
            functions: pass.functions,
            frames,
            calls,
            call_counts: pass.calls,
            self_insns: pass.self_insns,
        }
    }

    /// Frames sorted by start, outermost first (the order Chrome/Perfetto wants).
    pub fn frames_by_start(&self) -> Vec<Frame> {
        let mut f = self.frames.clone();
        f.sort_by(|a, b| a.start.cmp(&b.start).then(a.depth.cmp(&b.depth)));
        f
    }

    /// Calls whose call instruction executed in instruction range `[start, end)` (so the
    /// callee's first instruction is in `[start + 1, end + 1)`), per callee name, sorted by name.
    pub fn calls_in(&self, start: u64, end: u64) -> Vec<(String, u64)> {
        let i = self.calls.partition_point(|c| c.at <= start);
        let mut m: std::collections::BTreeMap<&str, u64> = Default::default();
        for c in self.calls[i..].iter().take_while(|c| c.at <= end) {
            *m.entry(self.functions[c.function as usize].name.as_str())
                .or_default() += 1;
        }
        m.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
    }
}

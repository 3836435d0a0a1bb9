//! Tasks: `sluice.spawn(fn, ...)`, `task:await()`, `sluice.all{...}` and
//! `sluice.map(list, fn, {limit = N})`. Each task is a Lua coroutine driven
//! as its own future on the run's [`LocalSet`], so the flow calls of
//! different tasks run at once and the pipeline's scheduler orders only
//! those whose envelopes overlap. The Lua side (`tasks.lua`) keeps each
//! task's outcome; this side drives the coroutines, wakes the waiters, and
//! ends the tasks still running when the script ends.

use crate::luastate::{current_task, DRIVING, TASK};
use crate::pipeline::Core;
use mlua::{Function, Lua, MultiValue, Table, Thread};
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Duration;
use tokio::sync::Notify;
use tokio::task::LocalSet;

/// How long the tasks still running when the script ends get to stop,
/// once cancelled, before they are dropped where they stand: their calls
/// stop at once; this covers a task that was sleeping or waiting.
const CANCEL_GRACE: Duration = Duration::from_secs(1);

const KEY: &str = "sluice.tasks";

/// The run's tasks, as Rust drives them.
#[derive(Default)]
pub struct Tasks {
    /// Woken whenever a task settles.
    settled: Rc<Notify>,
    /// Whether a script is running, so a spawned task has a [`LocalSet`]
    /// to run on.
    running: Rc<Cell<bool>>,
    /// The tasks the last script's end cancelled.
    cancelled: RefCell<Vec<String>>,
    /// Spawned tasks not yet ended.
    live: Rc<Cell<usize>>,
}

/// Whether spawned tasks are running beside the caller, for a call to give
/// them their turn: a flow that completes without waiting would otherwise
/// let a task calling it in a loop keep the others from running at all.
#[derive(Clone, Default)]
pub struct Others(Rc<Cell<usize>>);

impl Others {
    /// Lets the other tasks run, when there are any.
    pub async fn take_turns(&self) {
        if self.0.get() > 0 {
            tokio::task::yield_now().await;
        }
    }
}

/// How a script's tasks ended with it.
pub struct Ending {
    /// Tasks that failed with nobody awaiting them: their id and error.
    pub unawaited: Vec<(String, String)>,
}

impl Tasks {
    /// What a call asks to let the other tasks run.
    pub fn others(&self) -> Others {
        Others(self.live.clone())
    }

    /// Installs `spawn`, `all` and `map` in the `sluice` module `m`. A
    /// task a served request starts keeps its caller ([`Core::adopt`]) for
    /// as long as it runs, after the request has answered too.
    pub fn install(&self, lua: &Lua, m: &Table, core: Rc<Core>) -> mlua::Result<()> {
        let running = self.running.clone();
        let settled = self.settled.clone();
        let live = self.live.clone();
        let spawn = lua.create_function(move |lua, (co, t, args): (Thread, Table, MultiValue)| {
            if !running.get() {
                return Err(mlua::Error::runtime(
                    "sluice.spawn: tasks run only while a script runs (sluice run, Runtime::run_script or run_source)",
                ));
            }
            let settled = settled.clone();
            let live = live.clone();
            live.set(live.get() + 1);
            let own = co.to_pointer();
            let adopted = match core.serves_tasks() {
                true => Adopted::new(&core, &current_task(lua)?, t.get("id")?),
                false => Adopted(None),
            };
            let lua = lua.clone();
            tokio::task::spawn_local(async move {
                // Counted down however the task ends, dropped ones too.
                let _ended = Ended(live);
                let _adopted = adopted;
                let _known = crate::interrupt::task_thread(own);
                if let Err(e) = co.into_async::<()>(args).await {
                    // Only what xpcall cannot catch (memory) gets here.
                    let _ = fail(&lua, &t, &e);
                }
                settled.notify_waiters();
            });
            Ok(())
        })?;
        let settled = self.settled.clone();
        let wait = lua.create_async_function(move |_, ()| {
            let settled = settled.clone();
            async move {
                settled.notified().await;
                Ok(())
            }
        })?;
        let task: Function = lua.named_registry_value(TASK)?;
        let driving: Function = lua.named_registry_value(DRIVING)?;
        let api: Table = lua
            .load(include_str!("tasks.lua"))
            .set_name("=sluice.tasks")
            .call((spawn, wait, task, driving))?;
        for name in ["spawn", "all", "map"] {
            m.set(name, api.get::<Function>(name)?)?;
        }
        lua.set_named_registry_value(KEY, api)
    }

    /// `detach(fn, ...)`: starts a task nothing awaits, forgotten once it
    /// settles (a served request, which answers its caller itself).
    pub fn detacher(lua: &Lua) -> mlua::Result<Function> {
        lua.named_registry_value::<Table>(KEY)?.get("detach")
    }

    /// Runs `main` (a script's chunk) with its tasks beside it; when it
    /// ends, cancels the tasks still running and reports those that
    /// failed unawaited.
    pub async fn run(&self, lua: &Lua, core: &Core, main: Thread) -> (mlua::Result<()>, Ending) {
        let local = LocalSet::new();
        self.running.set(true);
        let api: Table = lua.named_registry_value(KEY).expect("tasks are installed");
        let _ = api.get::<Function>("reset").and_then(|f| f.call::<()>(()));
        core.cancel_tasks(false);
        let result = local.run_until(main.into_async::<()>(())).await;
        let cancelled = local.run_until(self.cancel_rest(&api, core)).await;
        drop(local);
        crate::interrupt::ending_tasks(false);
        self.running.set(false);
        core.cancel_tasks(false);
        let unawaited = failures(&api).unwrap_or_default();
        self.cancelled.replace(cancelled);
        (result, Ending { unawaited })
    }

    /// The tasks the last script's end cancelled, by id.
    pub fn cancelled(&self) -> Vec<String> {
        self.cancelled.borrow().clone()
    }

    /// Cancels the tasks still running and waits, at most
    /// [`CANCEL_GRACE`], until they have stopped; their ids.
    async fn cancel_rest(&self, api: &Table, core: &Core) -> Vec<String> {
        let unsettled = |api: &Table| -> Vec<String> {
            api.get::<Function>("unsettled")
                .and_then(|f| f.call(()))
                .unwrap_or_default()
        };
        let ids = unsettled(api);
        if ids.is_empty() {
            return ids;
        }
        core.cancel_tasks(true);
        // A cancelled task that catches the cancellation and loops would
        // never give this one thread back: its Lua raises from here on.
        crate::interrupt::ending_tasks(true);
        let stopped = async {
            loop {
                let notified = self.settled.notified();
                if unsettled(api).is_empty() {
                    break;
                }
                notified.await;
            }
        };
        let _ = tokio::time::timeout(CANCEL_GRACE, stopped).await;
        ids
    }
}

/// A task started by a served request's task, carrying its caller until
/// it ends, however it ends.
struct Adopted(Option<(Rc<Core>, String)>);

impl Adopted {
    fn new(core: &Rc<Core>, parent: &str, child: String) -> Adopted {
        Adopted(core.adopt(parent, &child).then(|| (core.clone(), child)))
    }
}

impl Drop for Adopted {
    fn drop(&mut self) {
        if let Some((core, task)) = self.0.take() {
            core.release_task(&task);
        }
    }
}

/// Counts a task down when it ends.
struct Ended(Rc<Cell<usize>>);

impl Drop for Ended {
    fn drop(&mut self) {
        self.0.set(self.0.get().saturating_sub(1));
    }
}

/// Marks task `t` failed with `e`, as the Lua side settles a task, so the
/// waits that count settled tasks hear of it.
fn fail(lua: &Lua, t: &Table, e: &mlua::Error) -> mlua::Result<()> {
    let api: Table = lua.named_registry_value(KEY)?;
    api.get::<Function>("broke")?.call((t, e.to_string()))
}

/// The failures no task awaited, oldest first.
fn failures(api: &Table) -> mlua::Result<Vec<(String, String)>> {
    let list: Table = api.get::<Function>("unawaited_failures")?.call(())?;
    list.sequence_values::<Table>()
        .map(|t| {
            let t = t?;
            Ok((t.get("id")?, t.get("error")?))
        })
        .collect()
}

/// What the script's end says of its tasks, for the error it returns:
/// `None` when nothing failed unawaited.
pub fn unawaited_message(ending: &Ending) -> Option<String> {
    let ((id, error), rest) = ending.unawaited.split_first()?;
    let more = match rest.len() {
        0 => String::new(),
        n => format!(" (and {n} more task(s) failed unawaited: {})", ids(rest)),
    };
    Some(format!(
        "task {id} failed and nothing awaited it: {error}{more}; await each task (task:await() or sluice.all) to handle its failure"
    ))
}

fn ids(list: &[(String, String)]) -> String {
    list.iter()
        .map(|(id, _)| id.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

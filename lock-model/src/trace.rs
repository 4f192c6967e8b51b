//! A counterexample as a trace of script calls, one line a step, that a
//! reader (or a test replaying it on a real server) can follow.

use std::fmt::Write;

use crate::lock::{Action, Answer, Call, LockModel, Op, State};

/// `steps` (a path the checker found, as `Path::into_vec` gives it) as one
/// line a step: the tick, who acts, the script a server runs and its reply.
pub fn trace(model: &LockModel, steps: &[(State, Option<Action>)]) -> String {
    let mut text = String::new();
    for pair in steps.windows(2) {
        let [(before, Some(action)), (after, _)] = pair else {
            continue;
        };
        let _ = writeln!(
            text,
            "t={} {}",
            before.now,
            step(model, before, after, *action)
        );
    }
    if let Some((last, _)) = steps.last() {
        let _ = writeln!(text, "then: {}", summary(last));
    }
    text
}

fn script(op: Op) -> String {
    match op {
        Op::Acquire { attempt } => format!("lock/acquire_token.lua (attempt {attempt})"),
        Op::Extend { attempt } => format!("lock/extend.lua (attempt {attempt})"),
        Op::Release { attempt } => format!("lock/release.lua (attempt {attempt})"),
        Op::Cleanup { attempt } => format!("lock/release.lua (cleanup of attempt {attempt})"),
        Op::TakeOver { from, attempt } => format!(
            "lock/take_over.lua (attempt {attempt}, from client {}'s attempt {} claiming token {})",
            from.client, from.attempt, from.claim
        ),
    }
}

fn answer(answer: Answer) -> String {
    match answer {
        Answer::Granted(token) => format!("granted, token {token}"),
        Answer::Held => "held".to_owned(),
        Answer::Extended => "extended".to_owned(),
        Answer::NotHeld => "not held".to_owned(),
        Answer::Released => "released".to_owned(),
        Answer::TakenOver => "taken over".to_owned(),
    }
}

fn step(model: &LockModel, before: &State, after: &State, action: Action) -> String {
    let client = |id: u8| format!("client {id}");
    match action {
        Action::Tick => match (before.server.hold, after.server.hold) {
            (Some(_), None) => "tick; the lock key expires".to_owned(),
            _ => "tick".to_owned(),
        },
        Action::Restart => "the server restarts and loses every key".to_owned(),
        Action::Acquire(id) | Action::Extend(id) | Action::Release(id) => {
            match after.clients[usize::from(id)].call {
                Some(Call::Sent(op, _)) => format!("{} sends {}", client(id), script(op)),
                _ => format!("{} {action:?}", client(id)),
            }
        }
        Action::Run(id) => match after.clients[usize::from(id)].call {
            Some(Call::Answered(op, _, reply)) => {
                format!(
                    "server runs {} for {}: {}",
                    script(op),
                    client(id),
                    answer(reply)
                )
            }
            _ => {
                let op = match before.clients[usize::from(id)].call {
                    Some(Call::Sent(op, _)) => script(op),
                    _ => "its call".to_owned(),
                };
                format!("server runs {op} for crashed {}", client(id))
            }
        },
        Action::RunOrphan(id, op) => {
            let mut scratch = before.clone();
            let reply = model.run(&mut scratch, id, op);
            format!(
                "server runs {} for {}, who gave up on it or crashed: {}",
                script(op),
                client(id),
                answer(reply)
            )
        }
        Action::Reply(id) => match before.clients[usize::from(id)].call {
            Some(Call::Answered(_, _, reply)) => {
                let lease = after.clients[usize::from(id)].lease;
                match lease {
                    Some(lease) => format!(
                        "{} reads {}; trusts its lease until t={}",
                        client(id),
                        answer(reply),
                        lease.valid_until
                    ),
                    None => format!("{} reads {}", client(id), answer(reply)),
                }
            }
            _ => format!("{} reads a reply", client(id)),
        },
        Action::LoseReply(id) => format!("{}'s call fails (reply lost or timed out)", client(id)),
        Action::HandOff(id) => format!("{} hands its lease off as a token", client(id)),
        Action::ResumeToken(id, _) => match after.clients[usize::from(id)].call {
            Some(Call::Sent(op, _)) => format!("{} resumes: sends {}", client(id), script(op)),
            _ => format!("{} resumes a token", client(id)),
        },
        Action::Pause(id) => format!("{} pauses", client(id)),
        Action::Resume(id) => format!("{} resumes", client(id)),
        Action::Crash(id) => format!("{} crashes", client(id)),
    }
}

fn summary(state: &State) -> String {
    let believers: Vec<String> = state
        .believers()
        .map(|(client, lease)| {
            format!(
                "client {client} trusts token {} until t={}",
                lease.token, lease.valid_until
            )
        })
        .collect();
    let server = match state.server.hold {
        Some(hold) if state.now < state.server.expires => format!(
            "the key holds client {}'s attempt {} (token {}) until t={}",
            hold.client, hold.attempt, hold.token, state.server.expires
        ),
        _ => "the key is gone".to_owned(),
    };
    format!(
        "t={}: {}; {}; counter {}",
        state.now,
        if believers.is_empty() {
            "nobody trusts a lease".to_owned()
        } else {
            believers.join(", ")
        },
        server,
        state.server.counter
    )
}

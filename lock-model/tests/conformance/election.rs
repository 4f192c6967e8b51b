//! The election's scripts against [`Election`]'s model: the lock's scripts
//! for the leadership, beside `election/proclaim.lua` and
//! `election/leader.lua`.

use lock_model::{Answer, Bounds, Election, LeaseModel};

use super::lock::LockSubject;
use super::{connect, walk, Real, Seen, BOUNDS, FAULTS, WALKS};

/// Every walk agrees with the model, on both clients.
#[test]
fn the_election_scripts_do_what_the_model_does() {
    lock_testkit::on_every_client(async |server, client| {
        let locks = connect(server, client).await;
        // A leadership is never handed off.
        let bounds = Bounds {
            hand_offs: false,
            ..BOUNDS
        };
        let model = LeaseModel::new(Election::default(), bounds, FAULTS);
        let mut seen = Seen::default();
        for seed in 0..WALKS {
            let name = format!("election-{client}-{seed}");
            let real = Real::new(server, locks.backend().as_ref(), &name);
            let label = format!("the election on {client}");
            walk(
                &model,
                &mut LockSubject(real),
                server,
                &label,
                seed,
                &mut seen,
            )
            .await;
        }
        seen.assert_everything(client, bounds);
        assert!(
            seen.answers.contains(&Answer::Proclaimed),
            "{client}: never proclaimed: {seen:?}"
        );
        for shown in [true, false] {
            let found = seen.shown.iter().any(|read| read.is_some() == shown);
            assert!(
                found,
                "{client}: a leader read never showed {shown}: {seen:?}"
            );
        }
    });
}

//! The error report written when a load or an execution fails and core dumps are enabled.

use nrt_core::Error;

use crate::rt;

pub(crate) fn report_core_dump(what: &str, e: &Error) {
    let Ok(config) = rt().config() else { return };
    let mut dumper = nrt_host::CoreDumper::from_config(&config);
    if let Ok(helper) = std::env::var("NRT_CORE_DUMP_HELPER") {
        dumper = dumper.with_helper(helper);
    }
    if !dumper.enabled() {
        return;
    }
    let vars = dumper.path_variables();
    let dir = dumper.local_output_dir(&vars);
    if std::fs::create_dir_all(&dir).is_err() {
        return;
    }
    let file = std::path::Path::new(&dir).join(format!("nrt-error-{}.log", vars.log_id));
    if std::fs::write(
        &file,
        format!("{what}: {} ({})\n", e.message(), e.status().name()),
    )
    .is_ok()
    {
        if let Err(err) = dumper.report_generated_file(&file) {
            rt().log(
                nrt_core::Level::Error,
                format_args!("core dump helper failed: {err}"),
            );
        }
    }
}

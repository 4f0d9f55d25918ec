//! Test plugin: a root module built against a different ABI version (0.99.0 where herd expects 0.2.0).
//!
//! It declares its own copy of the root module instead of using
//! `herd_plugin_abi::export_plugin!`, as a plugin built against another
//! version of the interface would.

#![allow(
    dead_code,
    reason = "the fields exist only to give the module its layout"
)]

use abi_stable::StableAbi;
use abi_stable::library::RootModule;
use abi_stable::prefix_type::PrefixTypeTrait;
use abi_stable::sabi_types::VersionStrings;
use abi_stable::std_types::{ROption, RResult, RStr};
use herd_plugin_abi::{HookInput, HookResult};

#[repr(C)]
#[derive(StableAbi)]
#[sabi(kind(Prefix(prefix_ref = PluginModuleRef, prefix_fields = PluginModulePrefix)))]
#[sabi(missing_field(panic))]
struct PluginModule {
    name: RStr<'static>,
    version: RStr<'static>,
    #[sabi(last_prefix_field)]
    transform: extern "C" fn(input: HookInput<'_>) -> HookResult,
}

impl std::fmt::Debug for PluginModule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PluginModule")
    }
}

impl RootModule for PluginModuleRef {
    abi_stable::declare_root_module_statics! {PluginModuleRef}
    const BASE_NAME: &'static str = "herd_plugin";
    const NAME: &'static str = "herd_plugin";
    const VERSION_STRINGS: VersionStrings = VersionStrings::new("0.99.0");
}

extern "C" fn transform(_input: HookInput<'_>) -> HookResult {
    RResult::ROk(ROption::RNone)
}

#[abi_stable::export_root_module]
fn root() -> PluginModuleRef {
    PluginModule {
        name: RStr::from_str("abiv"),
        version: RStr::from_str("0.0.1"),
        transform,
    }
    .leak_into_prefix()
}

// The one list of component kinds. Everything that exists once per kind is
// generated from it: the ComponentKind enum, the kind names, the factory
// types and sdk::Registry's add_<kind> (sdk/registry.h), the core registry's
// add_/create_<kind> and its factory variant (core/include/ftcore/registry.h),
// and the recipe's component sections (core/src/recipe/recipe.cpp).
// Adding a kind is one line here plus the header declaring its class
// (sdk/<kind>.h, forward-declared in sdk/registry.h).
//
// X(Type, name, recipe_rank, default_name, repeatable, factory_params, factory_args)
//   Type            the sdk class a component implements; its factory is TypeFactory
//   name            registry key prefix ("optimizer/adamw"), recipe section,
//                   and the suffix of add_<name> / create_<name>
//   recipe_rank     position of the section in a recipe's section list and lock file
//   default_name    component used when the recipe has no section, or nullptr (optional)
//   repeatable      true: the section may be an array of tables ([[logger]])
//   factory_params  what the factory receives, as a parenthesised parameter list
//   factory_args    the same parameters passed on, as a parenthesised argument list
//
// New kinds go at the END: the order is part of the plugin ABI (the enum's
// values and the order of sdk::Registry's virtual functions).
#pragma once

#define FTCORE_COMPONENT_KINDS(X)                                                                           \
  X(Optimizer, optimizer, 2, "adamw", false,                                                               \
    (std::vector<sdk::ParamGroupSpec> groups, const sdk::Options& options), (std::move(groups), options))   \
  X(Scheduler, scheduler, 3, "constant", false,                                                            \
    (const sdk::Options& options, const sdk::SchedulerContext& context), (options, context))                \
  X(Adapter, adapter, 0, nullptr, false, (const sdk::Options& options), (options))                         \
  X(Quantizer, quantizer, 1, nullptr, false, (const sdk::Options& options), (options))                     \
  X(Sampler, sampler, 4, nullptr, false, (const sdk::Options& options), (options))                         \
  X(Logger, logger, 5, "console", true, (const sdk::Options& options), (options))

// Strips one pair of parentheses: FTCORE_UNPARENTHESIZE (a, b) -> a, b.
#define FTCORE_UNPARENTHESIZE(...) __VA_ARGS__
